#include "engine/convert/hf-export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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
#include "engine/io/type-traits.h"
#include "engine/model.h"
#include "engine/tokenizer/pre-tokenizer.h"

namespace hearth {
namespace {

using namespace hf;
namespace fs = std::filesystem;
using json = nlohmann::json;

// A float as config.json should show it: the shortest decimal that reads back as the same float
// (1e-06, not 9.999999974752427e-07), as a JSON number.
json json_float(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

void write_text(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
    if (!out.flush()) fail("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) fail("cannot rename " + tmp.string() + " to " + p.string() + ": " + ec.message());
}

// --- tokenizer.model (SentencePiece ModelProto, protobuf wire format), for the converter
// ----------
//
// Field numbers from sentencepiece_model.proto: ModelProto { repeated SentencePiece pieces = 1
// { piece = 1, float score = 2, Type type = 3 }, TrainerSpec trainer_spec = 2 { model_type = 3,
// vocab_size = 4, byte_fallback = 35, unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43,
// unk_piece = 45, bos_piece = 46, eos_piece = 47, pad_piece = 48 }, NormalizerSpec
// normalizer_spec = 3 { name = 1, add_dummy_prefix = 3, remove_extra_whitespaces = 4,
// escape_whitespaces = 5 } }. The piece types are numbered as GGUF's token types.

class pb_writer {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  void tag(uint32_t field, uint32_t wire) { varint(uint64_t(field) << 3 | wire); }
  void integer(uint32_t field, int64_t v) {  // int32/enum/bool: negatives as 10-byte varints
    tag(field, 0);
    varint(uint64_t(v));
  }
  void fixed_float(uint32_t field, float f) {
    tag(field, 5);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int k = 0; k < 4; ++k) out_.push_back(char(uint8_t(u >> (8 * k))));
  }
  void bytes(uint32_t field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    out_.append(s);
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

template <typename T>
T unwrap_kv(result<T> r) {
  if (!r) fail(r.message());
  return std::move(r).value();
}

// A special token id of the vocabulary: the key's value when it is an id in [0, n), -1 when the
// key says none (an i32 -1, or a u32 past the vocabulary as old converters wrote), `fallback`
// when the key is absent (the reader's default for the tokenizer kind).
int64_t special_id(const gguf_file& f, const char* key, int64_t n, int64_t fallback) {
  const gguf_value* v = f.find(key);
  if (!v) return fallback;
  if (v->is_integer()) {
    const bool is_signed = v->type == gguf_value_type::i8 || v->type == gguf_value_type::i16 ||
                           v->type == gguf_value_type::i32 || v->type == gguf_value_type::i64;
    const int64_t id = is_signed ? v->i : v->u < uint64_t(n) ? int64_t(v->u) : -1;
    return id >= 0 && id < n ? id : -1;
  }
  fail("metadata key '" + std::string(key) + "' is not an integer");
}

struct vocab_facts {
  std::string model;  // tokenizer.ggml.model
  std::vector<std::string> tokens;
  std::optional<std::vector<double>> scores;
  std::optional<std::vector<int64_t>> types;
  int64_t unk = -1, bos = -1, eos = -1, pad = -1;

  int64_t n() const { return int64_t(tokens.size()); }
  int64_t type(int64_t id) const {
    return types && size_t(id) < types->size() ? (*types)[size_t(id)] : 1;
  }
};

vocab_facts read_vocab(const gguf_file& f) {
  vocab_facts v;
  v.model = unwrap_kv(f.get_string("tokenizer.ggml.model")).value_or("");
  v.tokens =
      unwrap_kv(f.get_string_array("tokenizer.ggml.tokens")).value_or(std::vector<std::string>{});
  if (v.tokens.empty()) fail("the file has no tokenizer.ggml.tokens");
  v.scores = unwrap_kv(f.get_float_array("tokenizer.ggml.scores"));
  v.types = unwrap_kv(f.get_int_array("tokenizer.ggml.token_type"));
  // The defaults vocab::from_gguf (as llama.cpp) assumes for SentencePiece vocabularies.
  const bool spm = v.model == "llama";
  v.unk = special_id(f, "tokenizer.ggml.unknown_token_id", v.n(), spm ? 0 : -1);
  v.bos = special_id(f, "tokenizer.ggml.bos_token_id", v.n(), spm ? 1 : -1);
  v.eos = special_id(f, "tokenizer.ggml.eos_token_id", v.n(), spm ? 2 : -1);
  v.pad = special_id(f, "tokenizer.ggml.padding_token_id", v.n(), -1);
  return v;
}

// The vocabulary of a GGUF file (tokenizer.ggml.model "llama") as a SentencePiece BPE model.
std::string tokenizer_model_bytes(const gguf_file& f, const vocab_facts& v) {
  const bool add_space_prefix =
      unwrap_kv(f.get_bool("tokenizer.ggml.add_space_prefix")).value_or(true);
  // The library refuses a model with more than one unknown piece (or none).
  std::string unknown;
  int64_t n_unknown = 0;
  for (int64_t id = 0; id < v.n(); ++id) {
    if (v.type(id) != 2) continue;
    if (++n_unknown <= 4) unknown += (unknown.empty() ? "" : ", ") + std::to_string(id);
  }
  if (n_unknown != 1) {
    fail("a SentencePiece model has exactly one unknown token, this vocabulary " +
         (n_unknown
              ? std::to_string(n_unknown) + " (ids " + unknown + (n_unknown > 4 ? ", ...)" : ")")
              : std::string("none")));
  }
  pb_writer model;
  bool byte_fallback = false;
  for (int64_t id = 0; id < v.n(); ++id) {
    const int64_t type = v.type(id);
    if (type < 1 || type > 6)
      fail("token " + std::to_string(id) + " has type " + std::to_string(type));
    byte_fallback |= type == 6;
    pb_writer piece;
    piece.bytes(1, v.tokens[size_t(id)]);
    piece.fixed_float(
        2, v.scores && size_t(id) < v.scores->size() ? float((*v.scores)[size_t(id)]) : 0.0f);
    piece.integer(3, type);
    model.bytes(1, piece.str());
  }
  pb_writer trainer;
  trainer.integer(3, 2);  // BPE: merges by score, as llama.cpp's SPM tokenizer
  trainer.integer(4, v.n());
  trainer.integer(35, byte_fallback);
  trainer.integer(40, v.unk);
  trainer.integer(41, v.bos);
  trainer.integer(42, v.eos);
  trainer.integer(43, v.pad);
  if (v.unk >= 0) trainer.bytes(45, v.tokens[size_t(v.unk)]);
  if (v.bos >= 0) trainer.bytes(46, v.tokens[size_t(v.bos)]);
  if (v.eos >= 0) trainer.bytes(47, v.tokens[size_t(v.eos)]);
  if (v.pad >= 0) trainer.bytes(48, v.tokens[size_t(v.pad)]);
  model.bytes(2, trainer.str());
  pb_writer normalizer;
  normalizer.bytes(1, "identity");
  normalizer.integer(3, add_space_prefix);
  normalizer.integer(4, 0);  // remove_extra_whitespaces
  normalizer.integer(5, 1);  // escape_whitespaces
  model.bytes(3, normalizer.str());
  return model.str();
}

// A byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") as tokenizer.json, in the form
// engine/import/hf-tokenizer.h reads back: the pre-tokenizer's expressions as Split steps before a
// ByteLevel one, control and user-defined tokens as added tokens, the rest in model.vocab (ids
// padded as [PAD<id>] by the converter are left out: the importer pads them back).
std::string tokenizer_json_text(const gguf_file& f, const vocab_facts& v) {
  const std::string pre_name = unwrap_kv(f.get_string("tokenizer.ggml.pre")).value_or("default");
  const pre_tokenizer_spec* spec = pre_tokenizer_find(pre_name);
  if (!spec) fail("pre-tokenizer '" + pre_name + "' is not known");
  const auto merges = unwrap_kv(f.get_string_array("tokenizer.ggml.merges"));
  if (!merges) fail("a gpt2 vocabulary without tokenizer.ggml.merges");

  json vocab_json = json::object();  // sorted by text; the ids say the order
  json added = json::array();
  for (int64_t id = 0; id < v.n(); ++id) {
    const std::string& text = v.tokens[size_t(id)];
    const int64_t type = v.type(id);
    if (type == 5 && text == "[PAD" + std::to_string(id) + "]") continue;
    if (type == 3 || type == 4) {
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == 4},
                       {"special", type == 3}});
    } else {
      vocab_json[text] = id;
    }
  }
  json pre_steps = json::array();
  for (const std::string_view r : spec->regexes) {
    pre_steps.push_back({{"type", "Split"},
                         {"pattern", {{"Regex", std::string(r)}}},
                         {"behavior", "Isolated"},
                         {"invert", false}});
  }
  pre_steps.push_back({{"type", "ByteLevel"},
                       {"add_prefix_space", false},
                       {"trim_offsets", true},
                       {"use_regex", false}});
  json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", true},
                     {"trim_offsets", false},
                     {"use_regex", true}};
  json t = json::object();
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = std::move(added);
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", std::move(pre_steps)}};
  t["post_processor"] = byte_level;
  t["decoder"] = byte_level;
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", spec->ignore_merges},
                {"vocab", std::move(vocab_json)},
                {"merges", *merges}};
  return t.dump(1) + "\n";
}

using named_files = std::vector<std::pair<std::string, std::string>>;

named_files tokenizer_files(const gguf_file& f) {
  const vocab_facts v = read_vocab(f);
  const std::string arch = unwrap_kv(f.get_string("general.architecture")).value_or("");
  named_files out;
  json tc = json::object();
  if (v.model == "llama") {
    out.emplace_back("tokenizer.model", tokenizer_model_bytes(f, v));
    tc["tokenizer_class"] = arch.starts_with("gemma") ? "GemmaTokenizer" : "LlamaTokenizer";
  } else if (v.model == "gpt2") {
    out.emplace_back("tokenizer.json", tokenizer_json_text(f, v));
    tc["tokenizer_class"] = "PreTrainedTokenizerFast";
  } else {
    fail("tokenizer '" + v.model + "' cannot be written (only \"llama\" and \"gpt2\")");
  }
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    if (auto b = unwrap_kv(f.get_bool(std::string("tokenizer.ggml.") + flag))) tc[flag] = *b;
  }
  const std::pair<const char*, int64_t> specials[] = {
      {"bos_token", v.bos}, {"eos_token", v.eos}, {"unk_token", v.unk}, {"pad_token", v.pad}};
  for (const auto& [key, id] : specials) {
    if (id >= 0) tc[key] = v.tokens[size_t(id)];
  }
  if (auto n_ctx = unwrap_kv(f.get_uint(arch + ".context_length"))) tc["model_max_length"] = *n_ctx;
  if (auto tmpl = unwrap_kv(f.get_string("tokenizer.chat_template"))) tc["chat_template"] = *tmpl;
  tc["clean_up_tokenization_spaces"] = false;
  out.emplace_back("tokenizer_config.json", tc.dump(2) + "\n");
  if (v.model == "gpt2") {  // what the importer makes of it must be this vocabulary
    auto back = hf_tokenizer_metadata(out[0].second, out[1].second);
    if (!back) fail("the written tokenizer.json does not read back: " + back.message());
  }
  return out;
}

// --- export -------------------------------------------------------------------------------------

struct planned_tensor {
  const gguf_tensor* src;
  const tensor_rule* rule;
  tensor_type type;  // written
  std::vector<int64_t> shape;
  int64_t expert = -1;  // >= 0: this slice of a stacked experts tensor

  int64_t n_elements() const { return expert >= 0 ? src->ne[0] * src->ne[1] : src->n_elements(); }
};

// Fills one HF tensor from its GGUF source: rows reordered back, types converted, gemma norms − 1.
result<void> fill_tensor(const planned_tensor& p, bool minus_one, std::span<uint8_t> out) {
  const gguf_tensor& s = *p.src;
  const int64_t n = s.ne[0], rows = p.expert >= 0 ? s.ne[1] : s.ne[1] * s.ne[2] * s.ne[3];
  const size_t src_row = size_t(tensor_type_row_bytes(s.type, n));
  const uint8_t* src_data = s.data + size_t(std::max<int64_t>(p.expert, 0) * rows) * src_row;
  const size_t out_row = size_t(n * elem_size(p.type));
  to_float_fn to_float = nullptr;
  if (s.type != tensor_type::f32 && s.type != tensor_type::f16 && s.type != tensor_type::bf16) {
    to_float = tensor_type_traits_of(s.type).to_float;
    if (!to_float) {
      return error{"type " + std::string(tensor_type_name(s.type)) + " cannot be dequantized"};
    }
  }
  const bool vector = p.rule->kind != tensor_kind::matrix;
  const int64_t groups = p.rule->rope_groups;
  // A vector's "rows" for the rope order are its elements.
  const auto order =
      groups ? rope_row_sources(vector ? n : rows, groups, false) : std::vector<int64_t>();
  std::vector<float> f32(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t from = groups && !vector ? order[size_t(r)] : r;
    const uint8_t* in = src_data + size_t(from) * src_row;
    uint8_t* dst = out.data() + size_t(r) * out_row;
    if (s.type == p.type && !minus_one && !(groups && vector)) {
      std::memcpy(dst, in, out_row);
      continue;
    }
    if (to_float) {
      to_float(in, f32.data(), n);
    } else {
      for (int64_t i = 0; i < n; ++i) f32[size_t(i)] = to_f32(s.type, in + i * elem_size(s.type));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = groups && vector ? order[size_t(i)] : i;
      const float v = minus_one ? f32[size_t(at)] - 1.0f : f32[size_t(at)];
      from_f32(p.type, v, dst + i * elem_size(p.type));
    }
  }
  return {};
}

std::string shard_name(int k, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", k, n);
  return buf;
}

hf_export_summary export_model(const std::string& gguf_path, const fs::path& dir,
                               const hf_export_params& params) {
  if (params.type && safetensors_dtype_name(*params.type).empty()) {
    fail("--type must be f32, f16 or bf16, not " + std::string(tensor_type_name(*params.type)));
  }
  if (params.n_shards < 1) fail("the number of shards must be at least 1");
  auto m = model::load(gguf_path, {.n_threads = 1});
  const model_hparams& hp = m->hparams();
  const gguf_file& f = m->file();
  const model_family* arch = model_family_by_gguf(hp.arch, hp.n_expert > 0);
  if (!arch) {
    fail("architecture '" + hp.arch + "'" + (hp.n_expert > 0 ? " with experts" : "") +
         " has no Hugging Face equivalent here");
  }
  if (hp.head_dim_k != hp.head_dim_v)
    fail("key and value head sizes differ, which config.json cannot say");
  if (m->weights().rope_freqs.present()) {
    fail("rope_freqs.weight (Llama 3.1 rope scaling) cannot be written to config.json yet");
  }
  model_dims d;
  d.family = arch;
  d.n_vocab = hp.n_vocab;
  d.n_embd = hp.n_embd;
  d.n_ff = hp.n_ff;
  d.n_layer = hp.n_layer;
  d.n_head = hp.n_head;
  d.n_head_kv = hp.n_head_kv;
  d.head_dim = hp.head_dim_k;
  d.n_expert = hp.n_expert;
  d.n_ff_exp = hp.n_ff_exp;
  d.tied = f.find_tensor("output.weight") == nullptr;
  const std::vector<tensor_rule> rules = tensor_rules(d);
  // A stacked experts tensor has one rule per expert.
  std::unordered_map<std::string, std::vector<const tensor_rule*>> by_gguf;
  for (const auto& r : rules) by_gguf[r.gguf].push_back(&r);

  hf_export_summary summary;
  std::map<tensor_type, uint64_t> dtype_bytes;
  std::vector<planned_tensor> plan;
  bool biases = false;
  for (const auto& t : f.tensors()) {
    auto it = by_gguf.find(t.name);
    if (it == by_gguf.end())
      fail("tensor '" + t.name + "' has no Hugging Face equivalent in " + hp.arch);
    const tensor_rule& r = *it->second.front();
    planned_tensor p{&t, &r, tensor_type::f32, {}};
    for (int k = t.n_dims - 1; k >= 0; --k) p.shape.push_back(t.ne[k]);
    const std::vector<int64_t> want =
        r.expert < 0 ? r.shape : std::vector<int64_t>{r.n_expert, r.shape[0], r.shape[1]};
    if (p.shape != want) {
      fail("tensor '" + t.name + "' has shape " + shape_text(p.shape) + " in HF order, expected " +
           shape_text(want));
    }
    if (r.kind == tensor_kind::matrix) {
      const bool plain =
          t.type == tensor_type::f32 || t.type == tensor_type::f16 || t.type == tensor_type::bf16;
      p.type = params.type ? *params.type : plain ? t.type : tensor_type::f32;
      dtype_bytes[p.type] += uint64_t(t.n_elements()) * uint64_t(elem_size(p.type));
    }
    if (r.expert >= 0) {  // one HF tensor per expert
      for (const tensor_rule* er : it->second) {
        planned_tensor e = p;
        e.rule = er;
        e.expert = er->expert;
        e.shape = er->shape;
        plan.push_back(std::move(e));
      }
      continue;
    }
    biases |= r.kind == tensor_kind::bias;
    if (r.kind == tensor_kind::norm && arch->norm_plus_one) {
      // HF stores w − 1 in F32; the import adds 1 back in F32. Exact for w in [0.5, 2^24)
      // (Sterbenz), not in general: count the values that would not come back.
      const auto* w = reinterpret_cast<const float*>(t.data);
      int64_t lossy = 0;
      for (int64_t i = 0; i < t.n_elements(); ++i) {
        float v;
        std::memcpy(&v, w + i, 4);
        lossy += !((v - 1.0f) + 1.0f == v) && !std::isnan(v);
      }
      if (lossy) {
        summary.warnings.push_back("tensor '" + t.name + "': " + std::to_string(lossy) +
                                   " values w do not survive (w - 1) + 1 in float32");
      }
    }
    plan.push_back(std::move(p));
  }
  // In the rules' order (HF's: embeddings, layer by layer, final norm, head).
  std::sort(plan.begin(), plan.end(), [](const auto& a, const auto& b) { return a.rule < b.rule; });
  if (params.n_shards > int(plan.size())) fail("more shards than tensors");

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create " + dir.string() + ": " + ec.message());

  // Shards: consecutive tensors, each shard about total / n bytes.
  const int n_shards = params.n_shards;
  std::vector<int> shard_of(plan.size());
  {
    auto out_bytes = [](const planned_tensor& p) {
      return uint64_t(p.n_elements()) * uint64_t(elem_size(p.type));
    };
    uint64_t total = 0;
    for (const auto& p : plan) total += out_bytes(p);
    uint64_t done = 0;
    int shard = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      // Leave at least one tensor for each shard still to come.
      const size_t left = plan.size() - i;
      if (shard < n_shards - 1 && (size_t(n_shards - 1 - shard) >= left ||
                                   (done >= total * uint64_t(shard + 1) / uint64_t(n_shards) &&
                                    i > 0 && shard_of[i - 1] == shard))) {
        ++shard;
      }
      shard_of[i] = shard;
      done += out_bytes(plan[i]);
    }
  }
  json weight_map = json::object();
  for (int s = 0; s < n_shards; ++s) {
    const std::string name = n_shards == 1 ? "model.safetensors" : shard_name(s + 1, n_shards);
    safetensors_writer w;
    w.set_metadata("format", "pt");
    for (size_t i = 0; i < plan.size(); ++i) {
      if (shard_of[i] != s) continue;
      const planned_tensor& p = plan[i];
      const bool minus_one = p.rule->kind == tensor_kind::norm && arch->norm_plus_one;
      w.add_tensor(p.rule->hf, p.type, p.shape, [&p, minus_one](std::span<uint8_t> out) {
        return fill_tensor(p, minus_one, out);
      });
      weight_map[p.rule->hf] = name;
    }
    if (auto r = w.write_file((dir / name).string()); !r) fail(r.message());
    summary.files.push_back(name);
    summary.tensor_bytes += w.data_bytes();
  }
  if (n_shards > 1) {
    json index = {{"metadata", {{"total_size", summary.tensor_bytes}}}, {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
    summary.files.push_back("model.safetensors.index.json");
  } else {
    fs::remove(dir / "model.safetensors.index.json", ec);
  }
  // Weights of an earlier conversion into the same directory (another shard count) go.
  std::vector<fs::path> stale_weights;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool weights = name == "model.safetensors" ||
                         (name.starts_with("model-") && name.ends_with(".safetensors"));
    if (weights &&
        std::find(summary.files.begin(), summary.files.end(), name) == summary.files.end()) {
      stale_weights.push_back(e.path());
    }
  }
  for (const auto& p : stale_weights) fs::remove(p, ec);

  // config.json: the engine's effective values, so that the import reads back the same model.
  const auto most = std::max_element(dtype_bytes.begin(), dtype_bytes.end(),
                                     [](auto& a, auto& b) { return a.second < b.second; });
  static const char* dtype_names[] = {"float32", "float16", "bfloat16"};
  const tensor_type main_type = most == dtype_bytes.end() ? tensor_type::f32 : most->first;
  json c = json::object();
  c["architectures"] = json::array({std::string(arch->hf_classes[0])});
  c["model_type"] = std::string(arch->hf_model_types[0]);
  if (!hp.name.empty()) c["_name_or_path"] = hp.name;
  c["hidden_size"] = hp.n_embd;
  c["intermediate_size"] = hp.n_ff;
  c["num_hidden_layers"] = hp.n_layer;
  c["num_attention_heads"] = hp.n_head;
  c["num_key_value_heads"] = hp.n_head_kv;
  c["head_dim"] = hp.head_dim_k;
  c["vocab_size"] = hp.n_vocab;
  if (hp.n_ctx_train > 0) c["max_position_embeddings"] = hp.n_ctx_train;
  c["rms_norm_eps"] = json_float(hp.norm_eps);
  c["rope_theta"] = json_float(hp.rope.freq_base);
  if (hp.rope.n_dims != hp.head_dim_k) {
    if (!arch->partial_rotary) {
      fail("rope.dimension_count " + std::to_string(hp.rope.n_dims) +
           " differs from the head size " + std::to_string(hp.head_dim_k) +
           ", which config.json of " + hp.arch + " cannot say");
    }
    c["partial_rotary_factor"] = double(hp.rope.n_dims) / double(hp.head_dim_k);
  }
  if (hp.rope.freq_scale != 1.0f) {
    const std::string a = hp.arch + ".";
    float factor = float(unwrap_kv(f.get_float(a + "rope.scaling.factor")).value_or(0.0));
    if (factor == 0.0f)
      factor = float(unwrap_kv(f.get_float(a + "rope.scale_linear")).value_or(0.0));
    if (!(factor > 0)) factor = 1.0f / hp.rope.freq_scale;
    if (hp.rope.ext_factor != 0.0f) {
      // YaRN: the magnitude is transformers' own (1 + 0.1 ln factor); another one has no key.
      if (hp.rope.attn_factor != 1.0f) {
        fail("a YaRN attention factor of " + std::to_string(hp.rope.attn_factor) +
             " cannot be written to config.json");
      }
      c["rope_scaling"] = {{"rope_type", "yarn"},
                           {"factor", json_float(factor)},
                           {"original_max_position_embeddings", hp.rope.n_ctx_orig},
                           {"beta_fast", json_float(hp.rope.beta_fast)},
                           {"beta_slow", json_float(hp.rope.beta_slow)},
                           {"extrapolation_factor", json_float(hp.rope.ext_factor)}};
    } else {
      c["rope_scaling"] = {
          {"type", "linear"}, {"rope_type", "linear"}, {"factor", json_float(factor)}};
    }
  }
  c["tie_word_embeddings"] = d.tied;
  if (arch->sliding_window) {
    c["sliding_window"] = hp.n_swa > 0 ? json(hp.n_swa) : json(nullptr);
  }
  if (arch->gguf == "gemma2") {
    c["attn_logit_softcapping"] = hp.attn_softcap > 0 ? json_float(hp.attn_softcap) : json(nullptr);
    c["final_logit_softcapping"] =
        hp.final_softcap > 0 ? json_float(hp.final_softcap) : json(nullptr);
    c["query_pre_attn_scalar"] = hp.n_layer == 46 ? hp.n_embd / hp.n_head : hp.head_dim_k;
    c["cache_implementation"] = "hybrid";
  }
  if (hp.n_expert > 0) {
    c[arch->moe == moe_style::qwen ? "num_experts" : "num_local_experts"] = hp.n_expert;
    c["num_experts_per_tok"] = hp.n_expert_used;
    if (arch->moe == moe_style::qwen) {
      c["moe_intermediate_size"] = hp.n_ff_exp;
      c["norm_topk_prob"] = true;
      c["decoder_sparse_step"] = 1;
      c["mlp_only_layers"] = json::array();
    } else if (hp.n_ff_exp != hp.n_ff) {
      fail("expert_feed_forward_length " + std::to_string(hp.n_ff_exp) +
           " differs from feed_forward_length " + std::to_string(hp.n_ff) +
           ", which a Mixtral config.json cannot say");
    }
  }
  if (arch->gguf == "gemma3") {
    c["sliding_window"] = hp.n_swa;
    c["sliding_window_pattern"] = hp.swa_pattern;
    json types = json::array();
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      const bool slides = il % hp.swa_pattern < hp.swa_pattern - 1;
      types.push_back(slides ? "sliding_attention" : "full_attention");
    }
    c["layer_types"] = std::move(types);
    c["rope_local_base_freq"] = json_float(hp.swa_freq_base);
    c["query_pre_attn_scalar"] = hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.head_dim_k;
    c["attn_logit_softcapping"] = nullptr;
    c["final_logit_softcapping"] = nullptr;
  }
  if (arch->gelu) {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["hidden_act"] = "gelu_pytorch_tanh";
  } else {
    c["hidden_act"] = "silu";
  }
  if (arch->attention_bias_key) c["attention_bias"] = biases;
  if (arch->mlp_bias_key) c["mlp_bias"] = false;
  const int32_t bos = m->vocab().bos(), eos = m->vocab().eos();
  if (bos >= 0) c["bos_token_id"] = bos;
  if (eos >= 0) c["eos_token_id"] = eos;
  c["torch_dtype"] = dtype_names[main_type == tensor_type::f32   ? 0
                                 : main_type == tensor_type::f16 ? 1
                                                                 : 2];
  write_text(dir / "config.json", c.dump(2) + "\n");
  summary.files.push_back("config.json");

  // The tokenizer; a tokenizer.model is checked by loading it with the SentencePiece library.
  for (const auto& [name, text] : tokenizer_files(f)) {
    write_text(dir / name, text);
    if (name == "tokenizer.model") {
      if (auto sp = sp_model::load((dir / name).string()); !sp) fail(sp.message());
    }
    summary.files.push_back(name);
  }
  for (const char* stale : {"tokenizer.model", "tokenizer.json"}) {
    if (std::find(summary.files.begin(), summary.files.end(), stale) == summary.files.end()) {
      fs::remove(dir / stale, ec);  // from an earlier conversion into the same directory
    }
  }
  return summary;
}

}  // namespace

result<std::vector<std::pair<std::string, std::string>>> hf_tokenizer_files(const gguf_file& f) {
  try {
    return tokenizer_files(f);
  } catch (const std::exception& e) {
    return error{"writing the tokenizer: " + std::string(e.what())};
  }
}

result<hf_export_summary> hf_export(const std::string& gguf_path, const std::string& dir,
                                    const hf_export_params& params) {
  try {
    return export_model(gguf_path, fs::path(dir), params);
  } catch (const std::exception& e) {
    return error{"converting " + gguf_path + " to " + dir + ": " + e.what()};
  }
}

}  // namespace hearth
