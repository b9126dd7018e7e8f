#include "engine/random-model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "engine/gguf-writer.h"
#include "engine/hf-tokenizer.h"
#include "engine/tensor-type.h"
#include "engine/thread-pool.h"
#include "engine/tokenizer-metadata.h"

namespace hearth {
namespace {

// The real models' config.json values (Hugging Face): TinyLlama/TinyLlama-1.1B-Chat-v1.0,
// Qwen/Qwen2.5-0.5B, meta-llama/Llama-3.2-1B, meta-llama/Meta-Llama-3-8B.
constexpr std::array<model_shape, 4> k_shapes = {{
    {.name = "tinyllama-1.1b",
     .model_name = "TinyLlama-1.1B",
     .size_label = "1.1B",
     .arch = "llama",
     .n_layer = 22,
     .n_embd = 2048,
     .n_head = 32,
     .n_head_kv = 4,
     .n_ff = 5632,
     .n_vocab = 32000,
     .n_ctx = 2048,
     .rope_base = 10000.0f,
     .norm_eps = 1e-5f,
     .vocab = random_vocab::llama_spm},
    {.name = "qwen2.5-0.5b",
     .model_name = "Qwen2.5-0.5B",
     .size_label = "0.5B",
     .arch = "qwen2",
     .n_layer = 24,
     .n_embd = 896,
     .n_head = 14,
     .n_head_kv = 2,
     .n_ff = 4864,
     .n_vocab = 151936,
     .n_ctx = 32768,
     .rope_base = 1000000.0f,
     .norm_eps = 1e-6f,
     .qkv_bias = true,
     .tied_output = true,
     .vocab = random_vocab::qwen2},
    {.name = "llama-3.2-1b",
     .model_name = "Llama-3.2-1B",
     .size_label = "1B",
     .arch = "llama",
     .n_layer = 16,
     .n_embd = 2048,
     .n_head = 32,
     .n_head_kv = 8,
     .n_ff = 8192,
     .n_vocab = 128256,
     .n_ctx = 131072,
     .rope_base = 500000.0f,
     .norm_eps = 1e-5f,
     .tied_output = true,
     .rope_scaling_factor = 32.0f,
     .rope_low_freq_factor = 1.0f,
     .rope_high_freq_factor = 4.0f,
     .rope_original_ctx = 8192,
     .vocab = random_vocab::llama3,
     .llama31_specials = true},
    {.name = "llama-3-8b",
     .model_name = "Meta-Llama-3-8B",
     .size_label = "8B",
     .arch = "llama",
     .n_layer = 32,
     .n_embd = 4096,
     .n_head = 32,
     .n_head_kv = 8,
     .n_ff = 14336,
     .n_vocab = 128256,
     .n_ctx = 8192,
     .rope_base = 500000.0f,
     .norm_eps = 1e-5f,
     .vocab = random_vocab::llama3},
}};

// Meta-Llama-3-8B-Instruct's chat template (tokenizer_config.json).
constexpr std::string_view k_llama3_chat_template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
    "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

constexpr int32_t k_llama3_n_text_tokens = 128000;
constexpr int32_t k_llama3_n_special = 256;
constexpr int32_t k_llama3_bos = 128000;
constexpr int32_t k_llama3_eot = 128009;

// --- random numbers -------------------------------------------------------------------------

constexpr uint64_t k_golden = 0x9e3779b97f4a7c15ull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The key of one tensor's streams: FNV-1a of its name, mixed with the seed.
uint64_t tensor_key(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return mix64(h ^ mix64(seed + k_golden));
}

// n values uniform in [offset - amplitude, offset + amplitude) from the splitmix64 stream
// starting at `key`: two values per 64-bit draw.
void fill_uniform(float* out, int64_t n, uint64_t key, float offset, float amplitude) {
  const float scale = amplitude * 0x1p-31f;
  uint64_t state = key;
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    state += k_golden;
    const uint64_t r = mix64(state);
    out[i] = offset + scale * float(int32_t(uint32_t(r)));
    out[i + 1] = offset + scale * float(int32_t(uint32_t(r >> 32)));
  }
  if (i < n) out[i] = offset + scale * float(int32_t(uint32_t(mix64(state + k_golden))));
}

// Uniform values with standard deviation s span ±s·√3.
constexpr float k_weight_std = 0.02f;
constexpr float k_norm_noise = 0.01f;  // norms: 1 ± this
const float k_sqrt3 = std::sqrt(3.0f);

}  // namespace

// As LlamaModel.generate_extra_tensors in convert_hf_to_gguf.py.
std::vector<float> llama3_rope_factors(const model_shape& s) {
  const int32_t dim = s.head_dim();
  const double factor = s.rope_scaling_factor;
  const double low = s.rope_low_freq_factor;
  const double high = s.rope_high_freq_factor;
  const double old_ctx = s.rope_original_ctx;
  const double low_freq_wavelen = old_ctx / low;
  const double high_freq_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int32_t i = 0; i < dim; i += 2) {
    // torch: 1.0 / (base ** (arange(0, dim, 2, float32) / dim)), in float32
    const float freq = 1.0f / std::pow(s.rope_base, float(i) / float(dim));
    const double wavelen = 2 * std::numbers::pi / double(freq);
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(float(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(float(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

namespace {

// --- vocabularies ---------------------------------------------------------------------------

result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{"cannot read " + path + " (set HEARTH_TESTDATA or --testdata)"};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const gguf_value* kv_find(const std::vector<gguf_kv>& kv, std::string_view key) {
  for (const auto& e : kv)
    if (e.key == key) return &e.value;
  return nullptr;
}

result<std::vector<gguf_kv>> llama_spm_vocab(const std::string& root) {
  const std::string path = root + "/vocab/ggml-vocab-llama-spm.gguf";
  auto f = gguf_file::open(path);
  if (!f) return error{f.message() + " (set HEARTH_TESTDATA or --testdata)"};
  std::vector<gguf_kv> kv;
  for (const auto& e : f->metadata())
    if (e.key.starts_with("tokenizer.")) kv.push_back(e);
  return kv;
}

// Qwen2's tokenizer.json as hf_tokenizer_metadata reads it, with or without its config.
result<std::vector<gguf_kv>> qwen2_hf_vocab(const std::string& root, bool with_config) {
  const std::string dir = root + "/tokenizers/qwen3/";
  auto json = read_text(dir + "tokenizer.json");
  if (!json) return json.err();
  std::string config;
  if (with_config) {
    auto c = read_text(dir + "tokenizer_config.json");
    if (!c) return c.err();
    config = std::move(*c);
  }
  auto kv = hf_tokenizer_metadata(*json, config);
  if (!kv) return error{dir + "tokenizer.json: " + kv.message()};
  const gguf_value* pre = kv_find(*kv, "tokenizer.ggml.pre");
  if (!pre || pre->str != "qwen2") {
    return error{dir + "tokenizer.json: expected the qwen2 pre-tokenizer, got '" +
                 (pre ? pre->str : std::string()) + "'"};
  }
  return kv;
}

result<std::vector<gguf_kv>> qwen2_vocab(const model_shape& s, const std::string& root) {
  auto kv = qwen2_hf_vocab(root, true);
  if (!kv) return kv.err();
  // Pad to the embedding's rows as convert_hf_to_gguf.py's get_vocab_base does.
  for (auto& e : *kv) {
    if (e.key != "tokenizer.ggml.tokens" && e.key != "tokenizer.ggml.token_type") continue;
    auto& items = e.value.items;
    if (items.size() > size_t(s.n_vocab)) {
      return error{"the Qwen2 vocabulary has " + std::to_string(items.size()) +
                   " tokens, more than the shape's " + std::to_string(s.n_vocab)};
    }
    const bool texts = e.key == "tokenizer.ggml.tokens";
    for (size_t id = items.size(); id < size_t(s.n_vocab); ++id) {
      items.push_back(texts ? gguf_string_value("[PAD" + std::to_string(id) + "]")
                            : gguf_i32_value(int32_t(gguf_token_type::unused)));
    }
  }
  return kv;
}

std::vector<std::string> llama3_special_tokens(bool llama31) {
  std::vector<std::string> t = {"<|begin_of_text|>", "<|end_of_text|>",
                                "<|reserved_special_token_0|>", "<|reserved_special_token_1|>"};
  int next_reserved = 2;
  auto reserved = [&] {
    return "<|reserved_special_token_" + std::to_string(next_reserved++) + "|>";
  };
  if (llama31) {
    // Llama 3.1 / 3.2 (tokenizer.json of meta-llama/Llama-3.2-1B).
    t.push_back("<|finetune_right_pad_id|>");
    t.push_back(reserved());
    t.push_back("<|start_header_id|>");
    t.push_back("<|end_header_id|>");
    t.push_back("<|eom_id|>");
    t.push_back("<|eot_id|>");
    t.push_back("<|python_tag|>");
  } else {
    // Llama 3.0 (meta-llama/llama3 tokenizer.py).
    t.push_back(reserved());
    t.push_back(reserved());
    t.push_back("<|start_header_id|>");
    t.push_back("<|end_header_id|>");
    t.push_back(reserved());
    t.push_back("<|eot_id|>");
  }
  while (t.size() < size_t(k_llama3_n_special)) t.push_back(reserved());
  return t;
}

result<std::vector<gguf_kv>> llama3_vocab(const model_shape& s, const std::string& root) {
  if (s.n_vocab != k_llama3_n_text_tokens + k_llama3_n_special) {
    return error{"a Llama 3 vocabulary has 128256 tokens, not " + std::to_string(s.n_vocab)};
  }
  auto qwen = qwen2_hf_vocab(root, false);
  if (!qwen) return qwen.err();
  const gguf_value* tokens = kv_find(*qwen, "tokenizer.ggml.tokens");
  const gguf_value* types = kv_find(*qwen, "tokenizer.ggml.token_type");
  const gguf_value* merges = kv_find(*qwen, "tokenizer.ggml.merges");
  if (!tokens || !types || !merges || tokens->items.size() < size_t(k_llama3_n_text_tokens)) {
    return error{"the Qwen2 vocabulary has fewer than 128000 tokens"};
  }

  std::vector<std::string> texts;
  std::vector<int32_t> type_ids;
  texts.reserve(size_t(s.n_vocab));
  type_ids.reserve(size_t(s.n_vocab));
  for (int32_t id = 0; id < k_llama3_n_text_tokens; ++id) {
    if (types->items[size_t(id)].i != int32_t(gguf_token_type::normal)) {
      return error{"Qwen2 token " + std::to_string(id) + " is not a normal token"};
    }
    texts.push_back(tokens->items[size_t(id)].str);
    type_ids.push_back(int32_t(gguf_token_type::normal));
  }
  // Keep the merges whose two parts and result are all kept tokens. Qwen2's ids follow its merge
  // order (merge k makes token 256 + k), so these are exactly its first 127744 merges.
  std::unordered_set<std::string_view> kept(texts.begin(), texts.end());
  std::vector<std::string> kept_merges;
  for (const gguf_value& m : merges->items) {
    const size_t space = m.str.find(' ');
    const std::string_view left = std::string_view(m.str).substr(0, space);
    const std::string_view right = std::string_view(m.str).substr(space + 1);
    if (kept.contains(left) && kept.contains(right) &&
        kept.contains(std::string(left) + std::string(right))) {
      kept_merges.push_back(m.str);
    }
  }
  kept.clear();
  for (std::string& t : llama3_special_tokens(s.llama31_specials)) {
    texts.push_back(std::move(t));
    type_ids.push_back(int32_t(gguf_token_type::control));
  }

  std::vector<gguf_kv> kv;
  kv.push_back({"tokenizer.ggml.model", gguf_string_value("gpt2")});
  kv.push_back({"tokenizer.ggml.pre", gguf_string_value("llama-bpe")});
  kv.push_back({"tokenizer.ggml.tokens", gguf_string_array_value(std::move(texts))});
  kv.push_back({"tokenizer.ggml.token_type", gguf_i32_array_value(type_ids)});
  kv.push_back({"tokenizer.ggml.merges", gguf_string_array_value(std::move(kept_merges))});
  kv.push_back({"tokenizer.ggml.bos_token_id", gguf_u32_value(k_llama3_bos)});
  kv.push_back({"tokenizer.ggml.eos_token_id", gguf_u32_value(k_llama3_eot)});
  kv.push_back({"tokenizer.ggml.add_bos_token", gguf_bool_value(true)});
  kv.push_back({"tokenizer.chat_template", gguf_string_value(std::string(k_llama3_chat_template))});
  return kv;
}

}  // namespace

std::span<const model_shape> model_shapes() {
  return k_shapes;
}

const model_shape* model_shape_find(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& s : k_shapes)
    if (s.name == lower) return &s;
  return nullptr;
}

std::string model_shape_names() {
  std::string out;
  for (const auto& s : k_shapes) out += (out.empty() ? "" : ", ") + std::string(s.name);
  return out;
}

int64_t random_tensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<random_tensor> random_model_tensors(const model_shape& s, int32_t n_layer) {
  if (n_layer <= 0) n_layer = s.n_layer;
  using k = random_tensor::kind;
  const int64_t embd = s.n_embd;
  const int64_t q_width = int64_t(s.n_head) * s.head_dim();
  const int64_t kv_width = int64_t(s.n_head_kv) * s.head_dim();
  std::vector<random_tensor> t;
  if (s.rope_scaling_factor > 0)
    t.push_back({"rope_freqs.weight", {s.head_dim() / 2}, k::rope_freqs});
  t.push_back({"token_embd.weight", {embd, s.n_vocab}, k::matrix});
  for (int32_t il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    t.push_back({p + "attn_norm.weight", {embd}, k::norm});
    t.push_back({p + "attn_q.weight", {embd, q_width}, k::matrix});
    if (s.qkv_bias) t.push_back({p + "attn_q.bias", {q_width}, k::bias});
    t.push_back({p + "attn_k.weight", {embd, kv_width}, k::matrix});
    if (s.qkv_bias) t.push_back({p + "attn_k.bias", {kv_width}, k::bias});
    t.push_back({p + "attn_v.weight", {embd, kv_width}, k::matrix});
    if (s.qkv_bias) t.push_back({p + "attn_v.bias", {kv_width}, k::bias});
    t.push_back({p + "attn_output.weight", {q_width, embd}, k::matrix});
    t.push_back({p + "ffn_norm.weight", {embd}, k::norm});
    t.push_back({p + "ffn_gate.weight", {embd, s.n_ff}, k::matrix});
    t.push_back({p + "ffn_up.weight", {embd, s.n_ff}, k::matrix});
    t.push_back({p + "ffn_down.weight", {s.n_ff, embd}, k::matrix});
  }
  t.push_back({"output_norm.weight", {embd}, k::norm});
  if (!s.tied_output) t.push_back({"output.weight", {embd, s.n_vocab}, k::matrix});
  return t;
}

uint64_t random_model_param_count(const model_shape& s, int32_t n_layer) {
  uint64_t n = 0;
  for (const auto& t : random_model_tensors(s, n_layer))
    if (t.what != random_tensor::kind::rope_freqs) n += uint64_t(t.n_elements());
  return n;
}

result<std::vector<gguf_kv>> random_model_vocab(const model_shape& s, const std::string& root) {
  switch (s.vocab) {
    case random_vocab::llama_spm:
      return llama_spm_vocab(root);
    case random_vocab::qwen2:
      return qwen2_vocab(s, root);
    case random_vocab::llama3:
      return llama3_vocab(s, root);
  }
  return error{"unknown vocabulary"};
}

result<random_model_summary> random_model_write(
    const model_shape& s, const random_model_options& o, const std::string& path,
    const std::function<void(size_t, size_t)>& progress) {
  const int32_t n_layer = o.n_layer > 0 ? o.n_layer : s.n_layer;
  auto vocab_kv = random_model_vocab(s, o.testdata_root);
  if (!vocab_kv) return vocab_kv.err();
  if (const gguf_value* tokens = kv_find(*vocab_kv, "tokenizer.ggml.tokens");
      !tokens || tokens->items.size() != size_t(s.n_vocab)) {
    return error{"the vocabulary of " + std::string(s.name) + " has " +
                 std::to_string(tokens ? tokens->items.size() : 0) + " tokens, not " +
                 std::to_string(s.n_vocab)};
  }

  // Metadata in the order llama.cpp's converter writes it.
  gguf_writer w;
  const std::string a = std::string(s.arch) + ".";
  std::string name = std::string(s.model_name) + " random weights";
  if (n_layer != s.n_layer) {
    name += ", " + std::to_string(n_layer) + " of " + std::to_string(s.n_layer) + " layers";
  }
  w.set_string("general.architecture", std::string(s.arch));
  w.set_string("general.type", "model");
  w.set_string("general.name", name);
  w.set_string("general.description", "random weights with " + std::string(s.model_name) +
                                          "'s shapes from hearth mkmodel --shape " +
                                          std::string(s.name) + " --seed " +
                                          std::to_string(o.seed) + "; not a trained model");
  w.set_string("general.size_label", std::string(s.size_label));
  w.set_u32(a + "block_count", uint32_t(n_layer));
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(s.n_embd));
  w.set_u32(a + "feed_forward_length", uint32_t(s.n_ff));
  w.set_u32(a + "attention.head_count", uint32_t(s.n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(s.n_head_kv));
  w.set_f32(a + "rope.freq_base", s.rope_base);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.norm_eps);
  w.set_u32("general.file_type", file_type_id(o.type));
  w.set_u32(a + "vocab_size", uint32_t(s.n_vocab));
  w.set_u32(a + "rope.dimension_count", uint32_t(s.head_dim()));
  for (auto& kv : *vocab_kv) w.set(std::move(kv.key), std::move(kv.value));
  vocab_kv->clear();
  w.set_u32("general.quantization_version", 2);

  const quant_model_info info{.arch = std::string(s.arch),
                              .n_layer = n_layer,
                              .n_head = s.n_head,
                              .n_head_kv = s.n_head_kv,
                              .has_output = !s.tied_output};
  const std::vector<random_tensor> tensors = random_model_tensors(s, n_layer);
  const int n_threads = o.n_threads > 0 ? o.n_threads : thread_pool::hardware_threads();
  thread_pool pool(n_threads);
  std::vector<float> rope_factors;
  if (s.rope_scaling_factor > 0) rope_factors = llama3_rope_factors(s);

  random_model_summary sum;
  sum.n_layer = n_layer;
  sum.n_tensors = tensors.size();
  size_t done = 0;
  for (const random_tensor& t : tensors) {
    const tensor_type type = tensor_type_for(o.type, info, t.name, t.ne);
    if (!can_quantize(type)) {
      return error{"tensor " + t.name + " would be " + std::string(tensor_type_name(type)) +
                   " in a " + std::string(file_type_name(o.type)) +
                   " file, which the quantizer cannot write yet"};
    }
    const int64_t row = t.ne[0];
    const int64_t n_rows = t.n_elements() / row;
    const uint64_t n_bytes = uint64_t(tensor_type_row_bytes(type, row)) * uint64_t(n_rows);
    sum.tensor_bytes += n_bytes;
    if (t.what != random_tensor::kind::rope_freqs) sum.n_params += uint64_t(t.n_elements());
    // Added lazily even for a dry run: nothing is made until the file is written.
    const uint64_t key = tensor_key(o.seed, t.name);
    float offset = 0, amplitude = k_weight_std * k_sqrt3;
    if (t.what == random_tensor::kind::norm) offset = 1, amplitude = k_norm_noise;
    w.add_tensor_lazy(
        t.name, type, t.ne,
        [&, type, row, n_rows, key, offset, amplitude, n = tensors.size()](std::span<uint8_t> out) {
          const int64_t row_bytes = tensor_type_row_bytes(type, row);
          if (t.what == random_tensor::kind::rope_freqs) {
            quantize_rows(type, rope_factors.data(), out.data(), 1, row);
          } else {
            // Each thread makes and quantizes a few rows at a time.
            constexpr int64_t k_chunk_rows = 16;
            pool.parallel_for(
                n_rows,
                [&](int64_t begin, int64_t end) {
                  std::vector<float> buf(size_t(std::min(k_chunk_rows, end - begin) * row));
                  for (int64_t r0 = begin; r0 < end; r0 += k_chunk_rows) {
                    const int64_t nr = std::min(k_chunk_rows, end - r0);
                    for (int64_t r = 0; r < nr; ++r) {
                      fill_uniform(buf.data() + r * row, row,
                                   mix64(key + uint64_t(r0 + r) * k_golden), offset, amplitude);
                    }
                    quantize_rows(type, buf.data(), out.data() + r0 * row_bytes, nr, row);
                  }
                },
                row * 16);
          }
          if (progress) progress(++done, n);
        });
  }
  sum.file_bytes = w.file_size();
  if (!path.empty()) {
    if (auto r = w.write_file(path); !r) return r.err();
  }
  return sum;
}

}  // namespace hearth
