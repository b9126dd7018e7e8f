// Random-weight models with the exact shapes of real ones, written as GGUF files that llama.cpp
// and other GGUF engines load as they load a conversion of the real model: the same tensor names
// and shapes, the same metadata keys, a real vocabulary. Speed does not depend on weight values,
// so these files stand in for the real models in benchmarks (bench/cpu-speed.sh) without
// downloading gigabytes of weights.
//
// The vocabularies come from the shared test data (../shared/testdata, `testdata_root` below):
//   tinyllama-1.1b  every tokenizer.ggml.* key of vocab/ggml-vocab-llama-spm.gguf (Llama 2, 32000)
//   qwen2.5-0.5b    tokenizers/qwen3/tokenizer.json through hf_tokenizer_metadata (pre "qwen2"):
//                   the Qwen2 BPE vocabulary and merges (Qwen3's added tokens, 4 more than
//                   Qwen2.5's), padded to 151936 with "[PAD<id>]" unused tokens as llama.cpp's
//                   converter pads
//   llama-3.*       no Llama 3 vocabulary exists in the test data, so one is built from the Qwen2
//                   BPE (whose ids are in merge order: merge k makes token 256 + k): its first
//                   128000 tokens and the merges among them, then Llama 3's 256 special tokens
//                   with their names and ids (<|begin_of_text|> 128000 ... <|eot_id|> 128009),
//                   pre-tokenizer "llama-bpe", Llama 3's chat template. Its token ids are not
//                   Llama 3's, but its size, special tokens and tokenizer kind are.
//
// Weights are deterministic in the seed: every row of every tensor has its own counter-based
// random stream (splitmix64 keyed by seed, tensor name and row), so rows are made in parallel and
// the result does not depend on the thread count. Matrices are uniform with standard deviation
// 0.02, norms 1 ± 0.01, biases uniform with standard deviation 0.02; rope_freqs.weight (Llama 3.2)
// holds the real rope-scaling factors.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/gguf.h"
#include "engine/quantize.h"

namespace hearth {

// Where a shape's vocabulary comes from (see above).
enum class random_vocab { llama_spm, qwen2, llama3 };

// The hyperparameters of one real model, as its config.json states them.
struct model_shape {
  std::string_view name;        // what --shape takes: "tinyllama-1.1b"
  std::string_view model_name;  // general.name: "TinyLlama-1.1B"
  std::string_view size_label;  // general.size_label: "1.1B"
  std::string_view arch;        // general.architecture: "llama", "qwen2"
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx = 0;  // context_length (max_position_embeddings)
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  bool qkv_bias = false;     // attn_q/k/v.bias (Qwen2)
  bool tied_output = false;  // no output.weight: the output projection is token_embd
  // Llama 3.1-style rope scaling, stored as rope_freqs.weight [head_dim / 2] F32; 0 = none.
  float rope_scaling_factor = 0;
  float rope_low_freq_factor = 0;
  float rope_high_freq_factor = 0;
  int32_t rope_original_ctx = 0;
  random_vocab vocab = random_vocab::llama_spm;
  // Llama 3.1+ special-token names (<|finetune_right_pad_id|>, <|eom_id|>, <|python_tag|>)
  // instead of Llama 3.0's reserved ones at 128004, 128008 and 128010.
  bool llama31_specials = false;

  int32_t head_dim() const { return n_embd / n_head; }
};

// Every shape, in the order --help lists them.
std::span<const model_shape> model_shapes();
// The shape named `name` (case-insensitive); nullptr when there is none.
const model_shape* model_shape_find(std::string_view name);
// The names model_shape_find() accepts, comma separated.
std::string model_shape_names();

// One tensor of a random model, in file order.
struct random_tensor {
  enum class kind { matrix, norm, bias, rope_freqs };
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the row length
  kind what = kind::matrix;

  int64_t n_elements() const;
};

// The tensors of `shape` with `n_layer` blocks (the shape's own count when 0), as llama.cpp
// names and shapes them.
std::vector<random_tensor> random_model_tensors(const model_shape& shape, int32_t n_layer = 0);
// The model's parameter count: every tensor but rope_freqs.weight (derived from the config, not a
// parameter), so the full shapes give the published counts.
uint64_t random_model_param_count(const model_shape& shape, int32_t n_layer = 0);

// rope_freqs.weight of a shape with Llama 3.1-style rope scaling, as llama.cpp's
// convert_hf_to_gguf.py computes it: per frequency pair, the factor its frequency is divided by
// (1 for short wavelengths, rope_scaling_factor for long ones, interpolated between).
std::vector<float> llama3_rope_factors(const model_shape& shape);

// The shape's tokenizer.ggml.* (and tokenizer.chat_template) metadata, built from the files under
// `testdata_root` (see above). Errors name the file.
result<std::vector<gguf_kv>> random_model_vocab(const model_shape& shape,
                                                const std::string& testdata_root);

struct random_model_options {
  file_type type = file_type::f16;
  uint64_t seed = 0;
  int32_t n_layer = 0;    // 0: the shape's; otherwise recorded in general.name
  int32_t n_threads = 0;  // 0: every hardware thread
  std::string testdata_root;
};

// What a random model file holds, before or after writing it.
struct random_model_summary {
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;    // the exact size of the GGUF file
  uint64_t tensor_bytes = 0;  // weight data only
  int32_t n_layer = 0;
  size_t n_tensors = 0;
};

// Builds the file's metadata and tensor list and checks that every tensor's type can be written;
// with `path` empty writes nothing (a dry run), else writes the file (atomically, one tensor in
// memory at a time). `progress(done_tensors, n_tensors)` is called after each tensor when given.
// Errors (a vocabulary file missing, a type the quantizer cannot write yet, a write failure) are
// returned as one message.
result<random_model_summary> random_model_write(
    const model_shape& shape, const random_model_options& options, const std::string& path,
    const std::function<void(size_t, size_t)>& progress = {});

}  // namespace hearth
