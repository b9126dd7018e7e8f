#include "engine/import/hf-import.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "engine/import/hf-format.h"
#include "engine/import/hf-tokenizer.h"
#include "engine/import/sp-model.h"
#include "engine/import/tokenizer-metadata.h"
#include "engine/io/safetensors.h"

namespace hearth {
namespace {

using namespace hf;
namespace fs = std::filesystem;
using json = nlohmann::json;

// config.json model_type (or, without one, architectures[0]) -> the family. Gemma 3's
// multimodal checkpoints (model_type gemma3, Gemma3ForConditionalGeneration) come here with their
// text_config, whose model_type is gemma3_text.
const model_family& family_of_config(const json& config) {
  std::string name, key = "model_type";
  if (auto it = config.find("model_type"); it != config.end() && it->is_string()) {
    name = it->get<std::string>();
  } else if (auto a = config.find("architectures");
             a != config.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    name = (*a)[0].get<std::string>();
    key = "architectures";
  } else {
    fail("config.json: no model_type (or architectures) says what the model is");
  }
  if (const model_family* f = model_family_by_hf(name)) return *f;
  fail("config.json: " + key + " '" + name +
       "' is not supported (supported: " + model_family_hf_names() + ")");
}

// A multimodal checkpoint (Gemma 3's Gemma3ForConditionalGeneration, model_type gemma3): the
// family whose language model its text_config is; nullptr for other configs.
const model_family* multimodal_family(const json& config) {
  auto mt = config.find("model_type");
  if (mt == config.end() || !mt->is_string()) return nullptr;
  for (const auto& f : model_families()) {
    if (!f.hf_multimodal_type.empty() && *mt == f.hf_multimodal_type) return &f;
  }
  return nullptr;
}

// Gemma 3's multimodal checkpoint: its text_config is the language model, with
// Gemma3TextConfig's defaults for the keys it leaves out (its released configs give only sizes,
// rope scaling and the window). Other configs unchanged.
json language_model_config(const json& config) {
  const model_family* family = multimodal_family(config);
  if (!family) return config;
  auto tc = config.find("text_config");
  if (tc == config.end() || !tc->is_object()) {
    fail("config.json: a gemma3 (Gemma3ForConditionalGeneration) config without a text_config");
  }
  json text = *tc;
  text["model_type"] = std::string(family->hf_model_types[0]);
  // transformers' Gemma3TextConfig defaults (the values of the 4B model).
  const std::pair<const char*, json> defaults[] = {
      {"vocab_size", 262208},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 1000000.0},
      {"rope_local_base_freq", 10000.0},
      {"query_pre_attn_scalar", 256},
      {"sliding_window", 4096},
  };
  for (const auto& [key, value] : defaults) {
    if (!text.contains(key)) text[key] = value;
  }
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "_name_or_path"}) {
    if (!text.contains(key) && config.contains(key)) text[key] = config[key];
  }
  return text;
}

// A multimodal Gemma 3 tensor name -> the text model's (language_model.model.X or
// model.language_model.X -> model.X; the head likewise); "" for the vision tower and projector,
// which the engine does not run.
std::string language_model_tensor(const std::string& name) {
  for (const std::string_view prefix : {"language_model.model.", "model.language_model."}) {
    if (name.starts_with(prefix)) return "model." + name.substr(prefix.size());
  }
  if (name == "language_model.lm_head.weight" || name == "lm_head.weight") return "lm_head.weight";
  return "";
}

// --- metadata values ----------------------------------------------------------------------------

gguf_value value_f32(double f) {
  gguf_value v;
  v.type = gguf_value_type::f32;
  v.f = double(float(f));
  return v;
}

// --- files --------------------------------------------------------------------------------------

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read " + p.filename().string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json read_json(const fs::path& p) {
  const std::string text = read_text(p);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(p.filename().string() + " is not valid JSON: " + e.what());
  }
}

// --- config.json --------------------------------------------------------------------------------

// config.json's values: present and of the right kind, or absent (a JSON null counts as absent,
// as transformers reads it).
class config_view {
 public:
  explicit config_view(const json& c) : c_(c) {}

  const json* find(const char* key) const {
    auto it = c_.find(key);
    return it == c_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<int64_t> integer(const char* key, int64_t lo = 1, int64_t hi = 0x7fffffff) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi) {
      fail("config.json: " + std::string(key) + " is " + v->dump() + ", expected an integer in [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return v->get<int64_t>();
  }
  int64_t required_integer(const char* key) const {
    auto v = integer(key);
    if (!v) fail("config.json: " + std::string(key) + " is missing");
    return *v;
  }
  std::optional<double> number(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      fail("config.json: " + std::string(key) + " is " + v->dump() + ", expected a number");
    }
    return v->get<double>();
  }
  std::optional<bool> boolean(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail("config.json: " + std::string(key) + " is not true or false");
    return v->get<bool>();
  }
  // A token id or, as Llama 3 writes eos_token_id, a list of them (the first is taken).
  std::optional<int64_t> token_id(const char* key) const {
    const json* v = find(key);
    if (v && v->is_array()) {
      if (v->empty()) return std::nullopt;
      v = &(*v)[0];
    }
    if (!v) return std::nullopt;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 0x7fffffff) {
      fail("config.json: " + std::string(key) + " is " + v->dump() + ", expected a token id");
    }
    return v->get<int64_t>();
  }

 private:
  const json& c_;
};

// --- import -------------------------------------------------------------------------------------

// Keeps the mapped shards and the transformed tensors alive for the gguf_file.
struct hf_storage {
  std::vector<std::shared_ptr<const void>> mappings;
  std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> buffers;

  uint8_t* alloc(uint64_t n) {
    void* p = std::aligned_alloc(64, size_t((n + 63) / 64 * 64));
    if (!p) throw std::bad_alloc();
    buffers.emplace_back(static_cast<uint8_t*>(p), &std::free);
    return static_cast<uint8_t*>(p);
  }
};

struct located_tensor {
  const safetensors_tensor* t;
  std::string file;
};

// The weights: model.safetensors, or the shards model.safetensors.index.json lists.
std::map<std::string, located_tensor> open_weights(const fs::path& dir,
                                                   std::vector<safetensors_file>& files) {
  std::map<std::string, std::string> weight_map;  // tensor -> file, from the index
  std::vector<std::string> names;
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    const json j = read_json(index);
    auto wm = j.find("weight_map");
    if (!j.is_object() || wm == j.end() || !wm->is_object()) {
      fail("model.safetensors.index.json has no weight_map object");
    }
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string())
        fail("model.safetensors.index.json: the file of '" + tensor + "' is not a string");
      const std::string f = file.get<std::string>();
      if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
          f.find('\\') != std::string::npos) {
        fail("model.safetensors.index.json: '" + f + "' is not a file name in the directory");
      }
      weight_map[tensor] = f;
      if (std::find(names.begin(), names.end(), f) == names.end()) names.push_back(f);
    }
    if (names.empty()) fail("model.safetensors.index.json lists no tensors");
  } else if (fs::exists(dir / "model.safetensors")) {
    names.push_back("model.safetensors");
  } else {
    fail("no model.safetensors or model.safetensors.index.json");
  }

  files.reserve(names.size());
  for (const auto& name : names) {
    auto f = safetensors_file::open((dir / name).string());
    if (!f) fail(f.message());
    files.push_back(std::move(f).value());
  }
  std::map<std::string, located_tensor> all;
  for (size_t k = 0; k < files.size(); ++k) {
    for (const auto& t : files[k].tensors()) {
      auto [it, inserted] = all.emplace(t.name, located_tensor{&t, names[k]});
      if (!inserted) {
        fail("tensor '" + t.name + "' is in both " + it->second.file + " and " + names[k]);
      }
    }
  }
  for (const auto& [tensor, file] : weight_map) {
    auto it = all.find(tensor);
    if (it == all.end() || it->second.file != file) {
      fail("tensor '" + tensor + "' is missing from " + file +
           " (model.safetensors.index.json lists it there)");
    }
  }
  return all;
}

struct imported_config {
  model_dims dims;
  std::vector<gguf_kv> kv;
  std::optional<int64_t> bos, eos;
  std::vector<float> rope_freqs;  // rope_freqs.weight (Llama 3.1 rope scaling), when not empty
};

// Llama 3.1's rope scaling as convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) turns it
// into rope_freqs.weight: per rotated pair, the divisor of its frequency. The converter computes
// in torch float32 (freqs and everything derived from them are float32 tensors; `a / t` is
// t.reciprocal() * a), which this repeats operation by operation.
std::vector<float> llama3_rope_factors(int64_t dim, float base, float factor, float low_freq,
                                       float high_freq, float old_ctx) {
  const float low_wavelen = old_ctx / low_freq, high_wavelen = old_ctx / high_freq;
  const float two_pi = float(2 * 3.14159265358979323846);
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, float(i) / float(dim));
    const float wavelen = (1.0f / freq) * two_pi;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = ((1.0f / wavelen) * old_ctx - low_freq) / (high_freq - low_freq);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

imported_config read_config(const json& config, const std::string& default_name) {
  if (!config.is_object()) fail("config.json is not a JSON object");
  const config_view c(config);
  imported_config out;
  model_dims& d = out.dims;
  const model_family& arch = family_of_config(config);
  d.family = &arch;
  d.n_embd = c.required_integer("hidden_size");
  d.n_ff = c.required_integer("intermediate_size");
  d.n_layer = c.required_integer("num_hidden_layers");
  d.n_head = c.required_integer("num_attention_heads");
  d.n_head_kv = c.integer("num_key_value_heads").value_or(d.n_head);
  if (d.n_layer > 4096 || d.n_head > 4096) {
    fail("config.json: num_hidden_layers or num_attention_heads is implausibly large");
  }
  d.head_dim = c.integer("head_dim")
                   .value_or(arch.default_head_dim ? arch.default_head_dim : d.n_embd / d.n_head);
  if (d.head_dim <= 0) fail("config.json: hidden_size is smaller than num_attention_heads");
  if (d.n_head % d.n_head_kv != 0) {
    fail("config.json: num_attention_heads (" + std::to_string(d.n_head) +
         ") is not a multiple of num_key_value_heads (" + std::to_string(d.n_head_kv) + ")");
  }
  if (arch.permute_qk && d.head_dim % 2 != 0) fail("config.json: head_dim must be even");
  d.n_vocab = c.integer("vocab_size").value_or(0);  // 0: from the embedding table
  d.tied = c.boolean("tie_word_embeddings").value_or(arch.tied_default);

  const std::string a = std::string(arch.gguf) + ".";
  auto& kv = out.kv;
  kv.push_back({"general.architecture", gguf_string_value(std::string(arch.gguf))});
  const json* name = c.find("_name_or_path");
  kv.push_back({"general.name",
                gguf_string_value(name && name->is_string() && !name->get<std::string>().empty()
                                      ? name->get<std::string>()
                                      : default_name)});
  if (auto n = c.integer("max_position_embeddings"))
    kv.push_back({a + "context_length", gguf_u32_value(uint32_t(*n))});
  kv.push_back({a + "embedding_length", gguf_u32_value(uint32_t(d.n_embd))});
  kv.push_back({a + "feed_forward_length", gguf_u32_value(uint32_t(d.n_ff))});
  kv.push_back({a + "block_count", gguf_u32_value(uint32_t(d.n_layer))});
  kv.push_back({a + "attention.head_count", gguf_u32_value(uint32_t(d.n_head))});
  kv.push_back({a + "attention.head_count_kv", gguf_u32_value(uint32_t(d.n_head_kv))});
  kv.push_back({a + "attention.key_length", gguf_u32_value(uint32_t(d.head_dim))});
  kv.push_back({a + "attention.value_length", gguf_u32_value(uint32_t(d.head_dim))});
  kv.push_back({a + "attention.layer_norm_rms_epsilon",
                value_f32(c.number("rms_norm_eps").value_or(arch.default_eps))});
  // transformers 5 writes rope_parameters (rope_theta and the scaling in one object) instead of
  // rope_theta and rope_scaling; per-layer-type ones (Gemma 3's) are not read.
  const json* rope_parameters = c.find("rope_parameters");
  if (rope_parameters &&
      (!rope_parameters->is_object() || !rope_parameters->contains("rope_type"))) {
    fail("config.json: rope_parameters without a rope_type (per layer type?) is not supported");
  }
  std::optional<double> rope_theta = c.number("rope_theta");
  if (!rope_theta && rope_parameters)
    rope_theta = config_view(*rope_parameters).number("rope_theta");
  kv.push_back({a + "rope.freq_base", value_f32(rope_theta.value_or(arch.default_rope_theta))});
  const double partial = c.number("partial_rotary_factor").value_or(1.0);
  if (!(partial > 0 && partial <= 1)) fail("config.json: partial_rotary_factor must be in (0, 1]");
  kv.push_back(
      {a + "rope.dimension_count", gguf_u32_value(uint32_t(double(d.head_dim) * partial))});

  const json* rope_scaling = c.find("rope_scaling");
  if (!rope_scaling) rope_scaling = rope_parameters;
  if (const json* rs = rope_scaling) {
    if (!rs->is_object()) fail("config.json: rope_scaling is not an object");
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
      if (auto it = rs->find(key); it != rs->end() && it->is_string())
        type = it->get<std::string>();
    }
    // A number of rope_scaling: `fallback` when absent, else positive.
    auto scaling_number = [&](const char* key, std::optional<double> fallback) {
      auto it = rs->find(key);
      if (it == rs->end() || it->is_null()) {
        if (!fallback) fail("config.json: rope_scaling " + type + " needs " + key);
        return *fallback;
      }
      if (!it->is_number() || !(it->get<double>() > 0)) {
        fail("config.json: rope_scaling " + std::string(key) + " is " + it->dump() +
             ", expected a positive number");
      }
      return it->get<double>();
    };
    if (type == "linear") {
      kv.push_back({a + "rope.scaling.type", gguf_string_value("linear")});
      kv.push_back({a + "rope.scaling.factor", value_f32(scaling_number("factor", std::nullopt))});
    } else if (type == "llama3") {
      if (arch.gguf != "llama") fail("config.json: rope_scaling llama3 is for llama models only");
      // The converter's defaults; the base is rope_theta, the dimension the head size.
      out.rope_freqs = llama3_rope_factors(
          d.head_dim, float(rope_theta.value_or(10000.0)), float(scaling_number("factor", 8.0)),
          float(scaling_number("low_freq_factor", 1.0)),
          float(scaling_number("high_freq_factor", 4.0)),
          float(scaling_number("original_max_position_embeddings", 8192.0)));
    } else if (type == "yarn") {
      for (const char* key : {"attention_factor", "mscale", "mscale_all_dim"}) {
        if (rs->contains(key) && !(*rs)[key].is_null()) {
          fail("config.json: rope_scaling yarn with " + std::string(key) +
               " is not supported (only factor, original_max_position_embeddings, beta_fast, "
               "beta_slow, extrapolation_factor)");
        }
      }
      kv.push_back({a + "rope.scaling.type", gguf_string_value("yarn")});
      kv.push_back({a + "rope.scaling.factor", value_f32(scaling_number("factor", std::nullopt))});
      const double orig = scaling_number("original_max_position_embeddings", std::nullopt);
      if (orig != std::floor(orig) || orig > 0x7fffffff) {
        fail("config.json: rope_scaling original_max_position_embeddings must be an integer");
      }
      kv.push_back({a + "rope.scaling.original_context_length", gguf_u32_value(uint32_t(orig))});
      const std::pair<const char*, const char*> optional[] = {
          {"extrapolation_factor", "rope.scaling.yarn_ext_factor"},
          {"beta_fast", "rope.scaling.yarn_beta_fast"},
          {"beta_slow", "rope.scaling.yarn_beta_slow"}};
      for (const auto& [key, gguf_key] : optional) {
        if (rs->contains(key) && !(*rs)[key].is_null()) {
          kv.push_back({a + gguf_key, value_f32(scaling_number(key, std::nullopt))});
        }
      }
    } else if (type != "default" && type != "none") {
      fail("config.json: rope_scaling type '" + type + "' is not supported (linear, llama3, yarn)");
    }
  }
  if (arch.sliding_window) {
    if (auto w = c.integer("sliding_window", 0))
      kv.push_back({a + "attention.sliding_window", gguf_u32_value(uint32_t(*w))});
  }
  if (arch.moe != moe_style::none) {
    const bool qwen = arch.moe == moe_style::qwen;
    d.n_expert = qwen ? c.required_integer("num_experts") : c.required_integer("num_local_experts");
    const int64_t used = c.required_integer("num_experts_per_tok");
    if (d.n_expert > 1024 || used > d.n_expert) {
      fail("config.json: " + std::to_string(used) + " experts per token of " +
           std::to_string(d.n_expert) + " (at most 1024, used at most all)");
    }
    d.n_ff_exp = qwen ? c.required_integer("moe_intermediate_size") : d.n_ff;
    kv.push_back({a + "expert_count", gguf_u32_value(uint32_t(d.n_expert))});
    kv.push_back({a + "expert_used_count", gguf_u32_value(uint32_t(used))});
    if (qwen) {
      kv.push_back({a + "expert_feed_forward_length", gguf_u32_value(uint32_t(d.n_ff_exp))});
      // The engine's Qwen3-MoE: experts in every layer, their weights renormalised.
      if (c.integer("decoder_sparse_step").value_or(1) != 1) {
        fail(
            "config.json: decoder_sparse_step other than 1 (dense layers between) is not "
            "supported");
      }
      if (const json* dense = c.find("mlp_only_layers"); dense && !dense->empty()) {
        fail("config.json: mlp_only_layers " + dense->dump() + " is not supported (expected [])");
      }
      if (!c.boolean("norm_topk_prob").value_or(false)) {
        fail(
            "config.json: norm_topk_prob false (or absent) is not supported: the engine "
            "renormalises the chosen experts' weights");
      }
    }
  }
  if (arch.gguf == "gemma3") {
    const int64_t window = c.integer("sliding_window").value_or(4096);
    kv.push_back({a + "attention.sliding_window", gguf_u32_value(uint32_t(window))});
    // Every pattern-th layer is global: transformers' newer configs list layer_types instead.
    int64_t pattern = c.integer("sliding_window_pattern").value_or(6);
    if (const json* types = c.find("layer_types")) {
      if (!types->is_array() || int64_t(types->size()) != d.n_layer) {
        fail("config.json: layer_types must list num_hidden_layers entries");
      }
      pattern = 0;
      for (size_t il = 0; il < types->size() && pattern == 0; ++il) {
        if ((*types)[il] == "full_attention") pattern = int64_t(il) + 1;
      }
      if (pattern == 0) pattern = d.n_layer + 1;  // no global layer in this model
      for (size_t il = 0; il < types->size(); ++il) {
        const bool slides = int64_t(il) % pattern < pattern - 1;
        if ((*types)[il] != (slides ? "sliding_attention" : "full_attention")) {
          fail("config.json: layer_types " + types->dump() +
               " is not a repeating pattern of sliding layers then one full_attention layer");
        }
      }
    }
    kv.push_back({a + "attention.sliding_window_pattern", gguf_u32_value(uint32_t(pattern))});
    kv.push_back(
        {a + "rope.freq_base_swa", value_f32(c.number("rope_local_base_freq").value_or(10000.0))});
    for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      if (c.find(cap)) fail("config.json: " + std::string(cap) + " is not supported for gemma3");
    }
    const int64_t engine_scalar = d.n_layer == 62 ? d.n_embd / d.n_head : d.head_dim;
    if (auto q = c.number("query_pre_attn_scalar"); q && *q != double(engine_scalar)) {
      fail("config.json: query_pre_attn_scalar " + json(*q).dump() +
           " is not supported: the engine scales queries by 1/sqrt(" +
           std::to_string(engine_scalar) + ") for this model");
    }
  }
  if (arch.gguf == "gemma2") {
    // A null soft-cap means none; the engine's default (when the key is absent) is Gemma 2's.
    kv.push_back({a + "attn_logit_softcapping",
                  value_f32(c.number("attn_logit_softcapping").value_or(0.0))});
    kv.push_back({a + "final_logit_softcapping",
                  value_f32(c.number("final_logit_softcapping").value_or(0.0))});
    // GGUF has no key for the query scale: the engine uses 1/sqrt(head_dim), or
    // 1/sqrt(n_embd / n_head) for the 46-layer (27B) model, as the reference engine does.
    const int64_t engine_scalar = d.n_layer == 46 ? d.n_embd / d.n_head : d.head_dim;
    if (auto s = c.number("query_pre_attn_scalar"); s && *s != double(engine_scalar)) {
      fail("config.json: query_pre_attn_scalar " + json(*s).dump() +
           " is not supported: the engine scales queries by 1/sqrt(" +
           std::to_string(engine_scalar) + ") for this model");
    }
  }
  out.bos = c.token_id("bos_token_id");
  out.eos = c.token_id("eos_token_id");
  return out;
}

// The tokenizer: tokenizer.model (SentencePiece) or tokenizer.json, as llama.cpp's converter
// reads them; config.json's bos/eos ids fill in where the tokenizer has none (its SpecialVocab).
std::vector<gguf_kv> read_tokenizer(const fs::path& dir, const imported_config& cfg) {
  const fs::path config_path = dir / "tokenizer_config.json";
  const bool has_config = fs::exists(config_path);
  result<std::vector<gguf_kv>> meta = error{""};
  if (fs::exists(dir / "tokenizer.model")) {
    meta = sp_model_metadata((dir / "tokenizer.model").string());
  } else if (fs::exists(dir / "tokenizer.json")) {
    meta = hf_tokenizer_metadata(read_text(dir / "tokenizer.json"),
                                 has_config ? read_text(config_path) : std::string());
  } else {
    fail("no tokenizer.model or tokenizer.json");
  }
  if (!meta) fail(meta.message());
  std::vector<gguf_kv> kv = std::move(meta).value();

  auto find = [&](std::string_view key) -> gguf_value* {
    for (auto& e : kv) {
      if (e.key == key) return &e.value;
    }
    return nullptr;
  };
  auto set = [&](const std::string& key, gguf_value v) {
    if (gguf_value* old = find(key)) {
      *old = std::move(v);
    } else {
      kv.push_back({key, std::move(v)});
    }
  };
  // config.json's vocab_size may be larger than the tokenizer (padded embeddings): the extra
  // ids become unused [PAD<id>] tokens, as convert_hf_to_gguf.py adds them.
  gguf_value* tokens = find("tokenizer.ggml.tokens");
  gguf_value* scores = find("tokenizer.ggml.scores");
  gguf_value* types = find("tokenizer.ggml.token_type");
  const int64_t n = tokens ? int64_t(tokens->items.size()) : 0, want = cfg.dims.n_vocab;
  if (want > 0 && want < n) {
    fail("config.json: vocab_size " + std::to_string(want) + " is smaller than the tokenizer's " +
         std::to_string(n) + " tokens");
  }
  for (int64_t id = n; tokens && id < want; ++id) {
    tokens->items.push_back(gguf_string_value("[PAD" + std::to_string(id) + "]"));
    if (scores) scores->items.push_back(value_f32(-1000.0));
    if (types) types->items.push_back(gguf_i32_value(5));  // unused
  }
  auto has_id = [&](const char* key) {
    const gguf_value* v = find(key);
    return v && !(v->type == gguf_value_type::i32 && v->i < 0);
  };
  if (cfg.bos && !has_id("tokenizer.ggml.bos_token_id")) {
    set("tokenizer.ggml.bos_token_id", gguf_u32_value(uint32_t(*cfg.bos)));
  }
  if (cfg.eos && !has_id("tokenizer.ggml.eos_token_id")) {
    set("tokenizer.ggml.eos_token_id", gguf_u32_value(uint32_t(*cfg.eos)));
  }
  if (has_config) {
    const json tc = read_json(config_path);
    for (const char* flag : {"add_bos_token", "add_eos_token"}) {
      if (auto it = tc.find(flag); tc.is_object() && it != tc.end() && it->is_boolean()) {
        set(std::string("tokenizer.ggml.") + flag, gguf_bool_value(it->get<bool>()));
      }
    }
  }
  return kv;
}

// One HF tensor as the engine wants it: in place when nothing changes, else a transformed copy.
gguf_tensor convert_tensor(const located_tensor& src, const tensor_rule& rule,
                           const model_family& arch, hf_storage& storage) {
  const safetensors_tensor& t = *src.t;
  const std::string where = "tensor '" + t.name + "' (" + src.file + ")";
  if (!t.type) fail(where + " has dtype " + t.dtype + ", which is not supported (F32, F16, BF16)");
  if (t.shape != rule.shape) {
    fail(where + " has shape " + t.shape_string() + ", expected " + shape_text(rule.shape) +
         " from config.json");
  }
  gguf_tensor g;
  g.name = rule.gguf;
  g.n_dims = int(t.shape.size());
  for (size_t k = 0; k < t.shape.size(); ++k) g.ne[k] = t.shape[t.shape.size() - 1 - k];
  const int64_t rows = g.ne[1];

  if (rule.kind == tensor_kind::matrix) {
    g.type = *t.type;
    g.n_bytes = t.n_bytes;
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % uintptr_t(elem_size(g.type)) == 0;
    if (rule.rope_groups == 0 && aligned) {
      g.data = t.data;
      return g;
    }
    uint8_t* out = storage.alloc(t.n_bytes);
    const size_t row_bytes = size_t(t.n_bytes / uint64_t(rows));
    const auto src_rows =
        rule.rope_groups ? rope_row_sources(rows, rule.rope_groups, true) : std::vector<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = rule.rope_groups ? src_rows[size_t(r)] : r;
      std::memcpy(out + size_t(r) * row_bytes, t.data + size_t(from) * row_bytes, row_bytes);
    }
    g.data = out;
    return g;
  }

  // Vectors become F32; gemma's norms gain their + 1; llama's q/k biases follow their rows.
  const int64_t n = t.n_elements();
  g.type = tensor_type::f32;
  g.n_bytes = uint64_t(n) * 4;
  const bool plus_one = rule.kind == tensor_kind::norm && arch.norm_plus_one;
  const bool aligned = reinterpret_cast<uintptr_t>(t.data) % 4 == 0;
  if (*t.type == tensor_type::f32 && !plus_one && rule.rope_groups == 0 && aligned) {
    g.data = t.data;
    return g;
  }
  auto* out = reinterpret_cast<float*>(storage.alloc(g.n_bytes));
  const auto src_rows =
      rule.rope_groups ? rope_row_sources(n, rule.rope_groups, true) : std::vector<int64_t>();
  const int64_t es = elem_size(*t.type);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t from = rule.rope_groups ? src_rows[size_t(i)] : i;
    const float v = to_f32(*t.type, t.data + from * es);
    out[i] = plus_one ? v + 1.0f : v;
  }
  g.data = reinterpret_cast<const uint8_t*>(out);
  return g;
}

// The whole model, or (with_weights false) only its metadata: config.json and the tokenizer,
// with general.file_type from config.json's torch_dtype and no tensors, for a model catalog.
gguf_file import_dir(const fs::path& dir, bool with_weights) {
  if (!fs::is_directory(dir)) fail("not a directory");
  if (!fs::exists(dir / "config.json"))
    fail("config.json is missing (not a Hugging Face model directory)");
  const json file_config = read_json(dir / "config.json");
  const bool multimodal = file_config.is_object() && multimodal_family(file_config) != nullptr;
  const json config = file_config.is_object() ? language_model_config(file_config) : file_config;
  fs::path base = dir.lexically_normal();
  if (base.filename().empty()) base = base.parent_path();  // "dir/"
  imported_config cfg = read_config(config, base.filename().string());
  if (!with_weights) {
    std::vector<gguf_kv> kv = std::move(cfg.kv);
    for (auto& e : read_tokenizer(dir, cfg)) kv.push_back(std::move(e));
    // llama.h's LLAMA_FTYPE_ALL_F32 / MOSTLY_F16 / MOSTLY_BF16.
    const config_view c(config);
    const json* dtype = c.find("torch_dtype");
    const std::string t = dtype && dtype->is_string() ? dtype->get<std::string>() : "";
    const int ftype = t == "float32" ? 0 : t == "float16" ? 1 : t == "bfloat16" ? 32 : -1;
    if (ftype >= 0) kv.push_back({"general.file_type", gguf_u32_value(uint32_t(ftype))});
    auto g = gguf_file::from_parts(std::move(kv), {}, nullptr);
    if (!g) fail(g.message());
    return std::move(g).value();
  }

  std::vector<safetensors_file> files;
  auto weights = open_weights(dir, files);
  if (multimodal) {  // the language model's tensors under their text-model names
    std::map<std::string, located_tensor> text;
    for (auto& [name, located] : weights) {
      const std::string t = language_model_tensor(name);
      if (!t.empty() && !text.emplace(t, located).second) {
        fail("tensor '" + name + "' (" + located.file + ") is there twice as '" + t + "'");
      }
    }
    weights = std::move(text);
  }
  model_dims& d = cfg.dims;
  // The embedding table's rows bound vocab_size (and give it when config.json does not) before
  // the vocabulary is padded to it.
  if (auto it = weights.find("model.embed_tokens.weight");
      it != weights.end() && it->second.t->shape.size() == 2) {
    const int64_t rows = it->second.t->shape[0];
    if (d.n_vocab == 0) d.n_vocab = rows;
    if (rows != d.n_vocab) {
      fail("tensor 'model.embed_tokens.weight' (" + it->second.file + ") has " +
           std::to_string(rows) + " rows but config.json says vocab_size " +
           std::to_string(d.n_vocab));
    }
  }
  std::vector<gguf_kv> kv = std::move(cfg.kv);
  for (auto& e : read_tokenizer(dir, cfg)) kv.push_back(std::move(e));
  if (d.n_vocab == 0) {
    for (const auto& e : kv) {
      if (e.key == "tokenizer.ggml.tokens") d.n_vocab = int64_t(e.value.items.size());
    }
  }

  const std::vector<tensor_rule> rules = tensor_rules(d);
  std::unordered_map<std::string, const tensor_rule*> by_hf;
  for (const auto& r : rules) by_hf.emplace(r.hf, &r);

  auto storage = std::make_shared<hf_storage>();
  for (const auto& f : files) storage->mappings.push_back(f.owner());
  std::vector<gguf_tensor> tensors;
  std::map<std::string, size_t> stacked;  // GGUF name of stacked experts -> index in tensors
  for (const auto& [name, located] : weights) {
    auto it = by_hf.find(name);
    if (it == by_hf.end()) {
      // Buffers some checkpoints carry that transformers recomputes; the tied head when tied.
      if (name.ends_with(".rotary_emb.inv_freq") || (d.tied && name == "lm_head.weight")) continue;
      fail("tensor '" + name + "' (" + located.file + ") has no place in a " +
           std::string(d.family->gguf) + " model with " + std::to_string(d.n_layer) + " layers" +
           (d.n_expert ? " and " + std::to_string(d.n_expert) + " experts" : ""));
    }
    const tensor_rule& rule = *it->second;
    gguf_tensor g = convert_tensor(located, rule, *d.family, *storage);
    if (rule.expert < 0) {
      tensors.push_back(std::move(g));
      continue;
    }
    // Expert E of a stacked tensor: copied into slice E, all experts of one type.
    auto [at, first] = stacked.emplace(rule.gguf, tensors.size());
    if (first) {
      gguf_tensor all = g;
      all.n_dims = 3;
      all.ne[2] = rule.n_expert;
      all.n_bytes = g.n_bytes * uint64_t(rule.n_expert);
      all.data = storage->alloc(all.n_bytes);
      tensors.push_back(all);
    }
    gguf_tensor& all = tensors[at->second];
    if (g.type != all.type) {
      fail("tensor '" + name + "' (" + located.file + ") is " +
           std::string(tensor_type_name(g.type)) + " but other experts of its layer are " +
           std::string(tensor_type_name(all.type)));
    }
    std::memcpy(const_cast<uint8_t*>(all.data) + size_t(g.n_bytes) * size_t(rule.expert), g.data,
                size_t(g.n_bytes));
  }
  if (!cfg.rope_freqs.empty()) {
    gguf_tensor g;
    g.name = "rope_freqs.weight";
    g.n_dims = 1;
    g.ne[0] = int64_t(cfg.rope_freqs.size());
    g.type = tensor_type::f32;
    g.n_bytes = uint64_t(cfg.rope_freqs.size()) * 4;
    uint8_t* out = storage->alloc(g.n_bytes);
    std::memcpy(out, cfg.rope_freqs.data(), size_t(g.n_bytes));
    g.data = out;
    tensors.push_back(g);
  }
  for (const auto& r : rules) {
    if (r.required && !weights.contains(r.hf)) {
      fail("tensor '" + r.hf + "' is missing (expected shape " + shape_text(r.shape) + ")");
    }
  }
  auto g = gguf_file::from_parts(std::move(kv), std::move(tensors), std::move(storage));
  if (!g) fail(g.message());
  return std::move(g).value();
}

}  // namespace

result<gguf_file> hf_import(const std::string& dir) {
  try {
    return import_dir(fs::path(dir), true);
  } catch (const std::exception& e) {
    return error{dir + ": " + e.what()};
  }
}

result<gguf_file> hf_import_metadata(const std::string& dir) {
  try {
    return import_dir(fs::path(dir), false);
  } catch (const std::exception& e) {
    return error{dir + ": " + e.what()};
  }
}

}  // namespace hearth
