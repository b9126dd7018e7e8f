// Hyperparameters of a model, and the one reader of the keys every supported family stores under
// the same `<arch>.` names (model_file reads them once per file; each architecture's load() adds
// its family's own keys through the same key readers).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "engine/backend.h"
#include "engine/io/gguf.h"

namespace hearth {

struct model_hparams {
  std::string arch;  // general.architecture
  std::string name;  // general.name (may be empty)
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;  // per-head size of queries and keys
  int32_t head_dim_v = 0;  // per-head size of values
  int32_t n_ff = 0;
  float norm_eps = 1e-5f;
  rope_params rope;
  // Family-specific; 0 = off. Set by the architecture's load().
  int32_t n_swa = 0;           // sliding-window length of the layers that use one
  float attn_softcap = 0.0f;   // attention scores: cap * tanh(score / cap) (gemma2)
  float final_softcap = 0.0f;  // logits: cap * tanh(logit / cap) (gemma2)
  float query_scale = 0.0f;    // q·k multiplier; 0 = 1 / sqrt(head_dim_k)
  // Sliding-window layers: with swa_pattern N > 0, layer il slides when il % N < N - 1 (Gemma 2:
  // 2, every even layer; Gemma 3: 6, five local layers then a global one); 0: every layer slides
  // (when n_swa > 0).
  int32_t swa_pattern = 0;
  float swa_freq_base = 0.0f;  // > 0: the sliding layers' rope base, unscaled (Gemma 3)
  // Mixture of experts (<arch>.expert_count, expert_used_count); 0 = a dense model.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;  // an expert's feed-forward width (expert_feed_forward_length, else n_ff)
};

// The architecture (which must be supported), general.name and the common hyperparameters of
// `f`. n_vocab is `<arch>.vocab_size`, else the length of tokenizer.ggml.tokens. An error names
// the missing or out-of-range key.
result<model_hparams> model_hparams_read(const gguf_file& f);

// One metadata key; these throw std::runtime_error naming the key when it is required and
// absent, of the wrong type or out of range (model::load turns that into its error).
uint32_t hparam_u32(const gguf_file& f, const std::string& key);
uint32_t hparam_u32_or(const gguf_file& f, const std::string& key, uint32_t fallback);
float hparam_f32_or(const gguf_file& f, const std::string& key, float fallback);

}  // namespace hearth
