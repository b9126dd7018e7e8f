#include "engine/hf-model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
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

#include "engine/hf-tokenizer.h"
#include "engine/model.h"
#include "engine/pre-tokenizer.h"
#include "engine/safetensors.h"
#include "engine/sp-model.h"
#include "engine/tokenizer-metadata.h"
#include "engine/type-traits.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Inside this file errors are thrown and turned into a result at hf_import / hf_export.
[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what);
}

// --- architectures ------------------------------------------------------------------------------

struct hf_arch {
  std::string_view gguf;        // general.architecture
  std::string_view model_type;  // config.json model_type written by the converter
  std::string_view hf_class;    // config.json architectures[0]
  bool permute_qk;              // llama: Q/K rows reordered for adjacent-pair rope
  bool norm_plus_one;           // gemma: HF stores w, GGUF stores 1 + w
  bool fused;                   // phi3: qkv_proj and gate_up_proj
  bool post_norms;              // gemma2: four norms per block
  bool tied_default;            // tie_word_embeddings when config.json does not say
  bool default_head_dim_256;    // head_dim when config.json does not say (Gemma configs)
  double default_eps;           // rms_norm_eps when config.json does not say (HF's defaults)
};

constexpr hf_arch k_archs[] = {
    {"llama", "llama", "LlamaForCausalLM", true, false, false, false, false, false, 1e-6},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false, false, false, false, false, false, 1e-6},
    {"phi3", "phi3", "Phi3ForCausalLM", false, false, true, false, false, false, 1e-5},
    {"gemma", "gemma", "GemmaForCausalLM", false, true, false, false, true, true, 1e-6},
    {"gemma2", "gemma2", "Gemma2ForCausalLM", false, true, false, true, true, true, 1e-6},
};

const hf_arch* arch_by_gguf(std::string_view name) {
  for (const auto& a : k_archs) {
    if (a.gguf == name) return &a;
  }
  return nullptr;
}

// config.json model_type (or, without one, architectures[0]) -> the architecture.
const hf_arch& arch_of_config(const json& config) {
  static const std::pair<std::string_view, std::string_view> aliases[] = {
      {"llama", "llama"},
      {"mistral", "llama"},
      {"qwen2", "qwen2"},
      {"phi3", "phi3"},
      {"gemma", "gemma"},
      {"gemma2", "gemma2"},
      {"LlamaForCausalLM", "llama"},
      {"MistralForCausalLM", "llama"},
      {"Qwen2ForCausalLM", "qwen2"},
      {"Phi3ForCausalLM", "phi3"},
      {"GemmaForCausalLM", "gemma"},
      {"Gemma2ForCausalLM", "gemma2"},
  };
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
  for (const auto& [from, to] : aliases) {
    if (from == name) return *arch_by_gguf(to);
  }
  fail("config.json: " + key + " '" + name +
       "' is not supported (supported: llama, mistral, qwen2, phi3, gemma, gemma2)");
}

// --- tensors: the names and shapes of both formats, one table for both directions ----------------

enum class tensor_kind { matrix, norm, bias };

struct tensor_rule {
  std::string hf;
  std::string gguf;
  tensor_kind kind;
  int64_t rope_groups;         // > 0: rows reordered for adjacent-pair rope, this many heads
  std::vector<int64_t> shape;  // HF order (outermost first)
  bool required;
};

struct model_dims {
  const hf_arch* arch = nullptr;
  int64_t n_vocab = 0, n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  bool tied = false;      // no lm_head: the output matrix is the embedding table
  bool qkv_bias = false;  // q/k/v biases required (qwen2); optional elsewhere
};

std::vector<tensor_rule> tensor_rules(const model_dims& d) {
  const hf_arch& a = *d.arch;
  const int64_t q = d.n_head * d.head_dim, kv = d.n_head_kv * d.head_dim;
  std::vector<tensor_rule> r;
  auto add = [&](std::string hf, std::string gguf, tensor_kind kind, std::vector<int64_t> shape,
                 bool required, int64_t groups = 0) {
    r.push_back({std::move(hf), std::move(gguf), kind, a.permute_qk ? groups : 0, std::move(shape),
                 required});
  };
  // In the order HF checkpoints list them, which the converter writes them in.
  add("model.embed_tokens.weight", "token_embd.weight", tensor_kind::matrix, {d.n_vocab, d.n_embd},
      true);
  for (int64_t il = 0; il < d.n_layer; ++il) {
    const std::string h = "model.layers." + std::to_string(il) + ".";
    const std::string g = "blk." + std::to_string(il) + ".";
    add(h + "input_layernorm.weight", g + "attn_norm.weight", tensor_kind::norm, {d.n_embd}, true);
    if (a.fused) {
      add(h + "self_attn.qkv_proj.weight", g + "attn_qkv.weight", tensor_kind::matrix,
          {q + 2 * kv, d.n_embd}, true);
    } else {
      add(h + "self_attn.q_proj.weight", g + "attn_q.weight", tensor_kind::matrix, {q, d.n_embd},
          true, d.n_head);
      add(h + "self_attn.k_proj.weight", g + "attn_k.weight", tensor_kind::matrix, {kv, d.n_embd},
          true, d.n_head_kv);
      add(h + "self_attn.v_proj.weight", g + "attn_v.weight", tensor_kind::matrix, {kv, d.n_embd},
          true);
      add(h + "self_attn.q_proj.bias", g + "attn_q.bias", tensor_kind::bias, {q}, d.qkv_bias,
          d.n_head);
      add(h + "self_attn.k_proj.bias", g + "attn_k.bias", tensor_kind::bias, {kv}, d.qkv_bias,
          d.n_head_kv);
      add(h + "self_attn.v_proj.bias", g + "attn_v.bias", tensor_kind::bias, {kv}, d.qkv_bias);
    }
    add(h + "self_attn.o_proj.weight", g + "attn_output.weight", tensor_kind::matrix, {d.n_embd, q},
        true);
    if (a.post_norms) {
      add(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight",
          tensor_kind::norm, {d.n_embd}, true);
      add(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
      add(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
    } else {
      add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", tensor_kind::norm,
          {d.n_embd}, true);
    }
    if (a.fused) {
      add(h + "mlp.gate_up_proj.weight", g + "ffn_up.weight", tensor_kind::matrix,
          {2 * d.n_ff, d.n_embd}, true);
    } else {
      add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", tensor_kind::matrix,
          {d.n_ff, d.n_embd}, true);
      add(h + "mlp.up_proj.weight", g + "ffn_up.weight", tensor_kind::matrix, {d.n_ff, d.n_embd},
          true);
    }
    add(h + "mlp.down_proj.weight", g + "ffn_down.weight", tensor_kind::matrix, {d.n_embd, d.n_ff},
        true);
  }
  add("model.norm.weight", "output_norm.weight", tensor_kind::norm, {d.n_embd}, true);
  if (!d.tied) {
    add("lm_head.weight", "output.weight", tensor_kind::matrix, {d.n_vocab, d.n_embd}, true);
  }
  return r;
}

// Adjacent-pair rope (llama as GGUF stores it) wants each head's rows interleaved: GGUF row
// 2b + a of a head holds HF row a * half + b (convert_hf_to_gguf.py LlamaModel.permute). Returns,
// for every output row, the input row it comes from.
std::vector<int64_t> rope_row_sources(int64_t rows, int64_t groups, bool to_gguf) {
  std::vector<int64_t> src(static_cast<size_t>(rows));
  const int64_t per = rows / groups, half = per / 2;
  for (int64_t h = 0; h < groups; ++h) {
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < half; ++b) {
        const int64_t gguf_row = h * per + 2 * b + a, hf_row = h * per + a * half + b;
        if (to_gguf) {
          src[size_t(gguf_row)] = hf_row;
        } else {
          src[size_t(hf_row)] = gguf_row;
        }
      }
    }
  }
  return src;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

int64_t elem_size(tensor_type t) {
  return t == tensor_type::f32 ? 4 : 2;  // only f32/f16/bf16 reach here
}

float to_f32(tensor_type t, const uint8_t* p) {
  uint16_t h;
  switch (t) {
    case tensor_type::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case tensor_type::f16:
      std::memcpy(&h, p, 2);
      return fp16_to_fp32(h);
    default:
      std::memcpy(&h, p, 2);
      return bf16_to_fp32(h);
  }
}

void from_f32(tensor_type t, float f, uint8_t* p) {
  if (t == tensor_type::f32) {
    std::memcpy(p, &f, 4);
  } else {
    const uint16_t h = t == tensor_type::f16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
    std::memcpy(p, &h, 2);
  }
}

// --- metadata values ----------------------------------------------------------------------------

gguf_value value_f32(double f) {
  gguf_value v;
  v.type = gguf_value_type::f32;
  v.f = double(float(f));
  return v;
}

// A float as config.json should show it: the shortest decimal that reads back as the same float
// (1e-06, not 9.999999974752427e-07), as a JSON number.
json json_float(float f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
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
// engine/hf-tokenizer.h reads back: the pre-tokenizer's expressions as Split steps before a
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
};

imported_config read_config(const json& config, const std::string& default_name) {
  if (!config.is_object()) fail("config.json is not a JSON object");
  const config_view c(config);
  imported_config out;
  model_dims& d = out.dims;
  const hf_arch& arch = arch_of_config(config);
  d.arch = &arch;
  d.n_embd = c.required_integer("hidden_size");
  d.n_ff = c.required_integer("intermediate_size");
  d.n_layer = c.required_integer("num_hidden_layers");
  d.n_head = c.required_integer("num_attention_heads");
  d.n_head_kv = c.integer("num_key_value_heads").value_or(d.n_head);
  if (d.n_layer > 4096 || d.n_head > 4096) {
    fail("config.json: num_hidden_layers or num_attention_heads is implausibly large");
  }
  d.head_dim =
      c.integer("head_dim").value_or(arch.default_head_dim_256 ? 256 : d.n_embd / d.n_head);
  if (d.head_dim <= 0) fail("config.json: hidden_size is smaller than num_attention_heads");
  if (d.n_head % d.n_head_kv != 0) {
    fail("config.json: num_attention_heads (" + std::to_string(d.n_head) +
         ") is not a multiple of num_key_value_heads (" + std::to_string(d.n_head_kv) + ")");
  }
  if (arch.permute_qk && d.head_dim % 2 != 0) fail("config.json: head_dim must be even");
  d.n_vocab = c.integer("vocab_size").value_or(0);  // 0: from the embedding table
  d.tied = c.boolean("tie_word_embeddings").value_or(arch.tied_default);
  d.qkv_bias = arch.gguf == "qwen2";

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
  kv.push_back({a + "rope.freq_base", value_f32(c.number("rope_theta").value_or(10000.0))});
  const double partial = c.number("partial_rotary_factor").value_or(1.0);
  if (!(partial > 0 && partial <= 1)) fail("config.json: partial_rotary_factor must be in (0, 1]");
  kv.push_back(
      {a + "rope.dimension_count", gguf_u32_value(uint32_t(double(d.head_dim) * partial))});

  if (const json* rs = c.find("rope_scaling")) {
    if (!rs->is_object()) fail("config.json: rope_scaling is not an object");
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
      if (auto it = rs->find(key); it != rs->end() && it->is_string())
        type = it->get<std::string>();
    }
    if (type == "linear") {
      auto factor = rs->find("factor");
      if (factor == rs->end() || !factor->is_number() || !(factor->get<double>() > 0)) {
        fail("config.json: rope_scaling linear needs a positive factor");
      }
      kv.push_back({a + "rope.scaling.type", gguf_string_value("linear")});
      kv.push_back({a + "rope.scaling.factor", value_f32(factor->get<double>())});
    } else if (type != "default" && type != "none") {
      fail("config.json: rope_scaling type '" + type + "' is not supported (only linear)");
    }
  }
  if (arch.gguf == "phi3" || arch.gguf == "gemma2") {
    if (auto w = c.integer("sliding_window", 0))
      kv.push_back({a + "attention.sliding_window", gguf_u32_value(uint32_t(*w))});
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
gguf_tensor convert_tensor(const located_tensor& src, const tensor_rule& rule, const hf_arch& arch,
                           hf_storage& storage) {
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
  const json config = read_json(dir / "config.json");
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
  const auto weights = open_weights(dir, files);
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
  for (const auto& [name, located] : weights) {
    auto it = by_hf.find(name);
    if (it == by_hf.end()) {
      // Buffers some checkpoints carry that transformers recomputes; the tied head when tied.
      if (name.ends_with(".rotary_emb.inv_freq") || (d.tied && name == "lm_head.weight")) continue;
      fail("tensor '" + name + "' (" + located.file + ") has no place in a " +
           std::string(d.arch->gguf) + " model with " + std::to_string(d.n_layer) + " layers");
    }
    tensors.push_back(convert_tensor(located, *it->second, *d.arch, *storage));
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

// --- export -------------------------------------------------------------------------------------

struct planned_tensor {
  const gguf_tensor* src;
  const tensor_rule* rule;
  tensor_type type;  // written
  std::vector<int64_t> shape;
};

// Fills one HF tensor from its GGUF source: rows reordered back, types converted, gemma norms − 1.
result<void> fill_tensor(const planned_tensor& p, bool minus_one, std::span<uint8_t> out) {
  const gguf_tensor& s = *p.src;
  const int64_t n = s.ne[0], rows = s.ne[1] * s.ne[2] * s.ne[3];
  const size_t src_row = size_t(tensor_type_row_bytes(s.type, n));
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
    const uint8_t* in = s.data + size_t(from) * src_row;
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
  const hf_arch* arch = arch_by_gguf(hp.arch);
  if (!arch) fail("architecture '" + hp.arch + "' has no Hugging Face equivalent here");
  if (hp.head_dim_k != hp.head_dim_v)
    fail("key and value head sizes differ, which config.json cannot say");
  if (m->weights().rope_freqs.present()) {
    fail("rope_freqs.weight (Llama 3.1 rope scaling) cannot be written to config.json yet");
  }
  model_dims d;
  d.arch = arch;
  d.n_vocab = hp.n_vocab;
  d.n_embd = hp.n_embd;
  d.n_ff = hp.n_ff;
  d.n_layer = hp.n_layer;
  d.n_head = hp.n_head;
  d.n_head_kv = hp.n_head_kv;
  d.head_dim = hp.head_dim_k;
  d.tied = f.find_tensor("output.weight") == nullptr;
  const std::vector<tensor_rule> rules = tensor_rules(d);
  std::unordered_map<std::string, const tensor_rule*> by_gguf;
  for (const auto& r : rules) by_gguf.emplace(r.gguf, &r);

  hf_export_summary summary;
  std::map<tensor_type, uint64_t> dtype_bytes;
  std::vector<planned_tensor> plan;
  bool biases = false;
  for (const auto& t : f.tensors()) {
    auto it = by_gguf.find(t.name);
    if (it == by_gguf.end())
      fail("tensor '" + t.name + "' has no Hugging Face equivalent in " + hp.arch);
    const tensor_rule& r = *it->second;
    planned_tensor p{&t, &r, tensor_type::f32, {}};
    for (int k = t.n_dims - 1; k >= 0; --k) p.shape.push_back(t.ne[k]);
    if (p.shape != r.shape) {
      fail("tensor '" + t.name + "' has shape " + shape_text(p.shape) + " in HF order, expected " +
           shape_text(r.shape));
    }
    if (r.kind == tensor_kind::matrix) {
      const bool plain =
          t.type == tensor_type::f32 || t.type == tensor_type::f16 || t.type == tensor_type::bf16;
      p.type = params.type ? *params.type : plain ? t.type : tensor_type::f32;
      dtype_bytes[p.type] += uint64_t(t.n_elements()) * uint64_t(elem_size(p.type));
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
      return uint64_t(p.src->n_elements()) * uint64_t(elem_size(p.type));
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
  c["architectures"] = json::array({std::string(arch->hf_class)});
  c["model_type"] = std::string(arch->model_type);
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
    if (arch->gguf != "phi3") {
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
    c["rope_scaling"] = {
        {"type", "linear"}, {"rope_type", "linear"}, {"factor", json_float(factor)}};
  }
  c["tie_word_embeddings"] = d.tied;
  if (arch->gguf == "phi3" || arch->gguf == "gemma2") {
    c["sliding_window"] = hp.n_swa > 0 ? json(hp.n_swa) : json(nullptr);
  }
  if (arch->gguf == "gemma2") {
    c["attn_logit_softcapping"] = hp.attn_softcap > 0 ? json_float(hp.attn_softcap) : json(nullptr);
    c["final_logit_softcapping"] =
        hp.final_softcap > 0 ? json_float(hp.final_softcap) : json(nullptr);
    c["query_pre_attn_scalar"] = hp.n_layer == 46 ? hp.n_embd / hp.n_head : hp.head_dim_k;
    c["cache_implementation"] = "hybrid";
  }
  if (arch->gguf == "gemma" || arch->gguf == "gemma2") {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["hidden_act"] = "gelu_pytorch_tanh";
  } else {
    c["hidden_act"] = "silu";
  }
  if (arch->gguf == "llama") {
    c["attention_bias"] = biases;
    c["mlp_bias"] = false;
  }
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

bool hf_is_model_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

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

result<hf_export_summary> hf_export(const std::string& gguf_path, const std::string& dir,
                                    const hf_export_params& params) {
  try {
    return export_model(gguf_path, fs::path(dir), params);
  } catch (const std::exception& e) {
    return error{"converting " + gguf_path + " to " + dir + ": " + e.what()};
  }
}

}  // namespace hearth
