#include "engine/model-hparams.h"

#include <stdexcept>

#include "engine/architecture.h"

namespace hearth {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what);
}

template <typename T>
T unwrap(result<T> r) {
  if (!r) fail(r.message());
  return std::move(r).value();
}

// Tokens of the vocabulary, when `<arch>.vocab_size` does not say (most files).
int32_t n_tokens(const gguf_file& f) {
  const gguf_value* v = f.find("tokenizer.ggml.tokens");
  if (!v || v->type != gguf_value_type::array || v->items.size() > 0x7fffffff) return 0;
  return int32_t(v->items.size());
}

void read_common(const gguf_file& f, model_hparams& hp) {
  const std::string a = hp.arch + ".";
  hp.n_ctx_train = int32_t(hparam_u32_or(f, a + "context_length", 0));
  hp.n_embd = int32_t(hparam_u32(f, a + "embedding_length"));
  hp.n_layer = int32_t(hparam_u32(f, a + "block_count"));
  hp.n_ff = int32_t(hparam_u32(f, a + "feed_forward_length"));
  hp.n_head = int32_t(hparam_u32(f, a + "attention.head_count"));
  hp.n_head_kv = int32_t(hparam_u32_or(f, a + "attention.head_count_kv", uint32_t(hp.n_head)));
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_ff <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0) {
    fail("embedding_length, block_count, feed_forward_length and head counts must be positive");
  }
  if (hp.n_layer > 4096 || hp.n_head > 4096) fail("block_count or head_count is implausibly large");
  if (hp.n_head % hp.n_head_kv != 0) {
    fail("attention.head_count (" + std::to_string(hp.n_head) +
         ") is not a multiple of head_count_kv (" + std::to_string(hp.n_head_kv) + ")");
  }
  const uint32_t default_head = uint32_t(hp.n_embd / hp.n_head);
  hp.head_dim_k = int32_t(hparam_u32_or(f, a + "attention.key_length", default_head));
  hp.head_dim_v = int32_t(hparam_u32_or(f, a + "attention.value_length", default_head));
  if (hp.head_dim_k <= 0 || hp.head_dim_v <= 0 || hp.head_dim_k > 2048 || hp.head_dim_v > 2048) {
    fail("attention key/value length must be in [1, 2048]");
  }
  hp.norm_eps = hparam_f32_or(f, a + "attention.layer_norm_rms_epsilon", 1e-5f);
  hp.n_vocab = int32_t(hparam_u32_or(f, a + "vocab_size", uint32_t(n_tokens(f))));

  hp.rope.n_dims = int32_t(hparam_u32_or(f, a + "rope.dimension_count", uint32_t(hp.head_dim_k)));
  if (hp.rope.n_dims <= 0 || hp.rope.n_dims % 2 != 0 || hp.rope.n_dims > hp.head_dim_k) {
    fail("rope.dimension_count " + std::to_string(hp.rope.n_dims) +
         " must be even and at most the head size " + std::to_string(hp.head_dim_k));
  }
  hp.rope.freq_base = hparam_f32_or(f, a + "rope.freq_base", 10000.0f);
  // Linear context scaling stretches positions by `factor` (older files: rope.scale_linear); YaRN
  // (rope.scaling.type yarn) also scales by it, mixed with the unscaled angles (engine/backend.h).
  auto scaling_type = unwrap(f.get_string(a + "rope.scaling.type"));
  if (scaling_type && *scaling_type != "none" && *scaling_type != "linear" &&
      *scaling_type != "yarn") {
    fail("rope scaling '" + *scaling_type + "' is not supported (only linear and yarn)");
  }
  float factor = hparam_f32_or(f, a + "rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = hparam_f32_or(f, a + "rope.scale_linear", 0.0f);
  const bool scaled = factor > 0.0f && (!scaling_type || *scaling_type != "none");
  hp.rope.freq_scale = scaled ? 1.0f / factor : 1.0f;
  if (scaling_type && *scaling_type == "yarn") {
    // The reference engine's defaults: extrapolation on (1), magnitude 1, betas 32 and 1, the
    // original context the training context.
    hp.rope.ext_factor = hparam_f32_or(f, a + "rope.scaling.yarn_ext_factor", 1.0f);
    hp.rope.attn_factor = hparam_f32_or(f, a + "rope.scaling.yarn_attn_factor", 1.0f) *
                          hparam_f32_or(f, a + "rope.scaling.attn_factor", 1.0f);
    hp.rope.beta_fast = hparam_f32_or(f, a + "rope.scaling.yarn_beta_fast", 32.0f);
    hp.rope.beta_slow = hparam_f32_or(f, a + "rope.scaling.yarn_beta_slow", 1.0f);
    hp.rope.n_ctx_orig = int32_t(
        hparam_u32_or(f, a + "rope.scaling.original_context_length", uint32_t(hp.n_ctx_train)));
    if (!scaled) fail("rope scaling 'yarn' needs a positive rope.scaling.factor");
    if (hp.rope.n_ctx_orig <= 0) {
      fail("rope scaling 'yarn' needs rope.scaling.original_context_length (or context_length)");
    }
    if (!(hp.rope.ext_factor >= 0 && hp.rope.ext_factor <= 1) || !(hp.rope.attn_factor > 0) ||
        !(hp.rope.beta_fast > 0) || !(hp.rope.beta_slow > 0)) {
      fail(
          "rope.scaling.yarn_ext_factor must be in [0, 1], yarn_attn_factor and the betas "
          "positive");
    }
  }
  if (!(hp.rope.freq_base > 0) || !(hp.rope.freq_scale > 0))
    fail("rope frequency base and scale must be positive");

  hp.n_expert = int32_t(hparam_u32_or(f, a + "expert_count", 0));
  if (hp.n_expert > 0) {
    hp.n_expert_used = int32_t(hparam_u32(f, a + "expert_used_count"));
    // The bound keeps a hostile file from sizing per-token router buffers: the largest models
    // published use 256 experts.
    if (hp.n_expert > 1024 || hp.n_expert_used < 1 || hp.n_expert_used > hp.n_expert) {
      fail("expert_count " + std::to_string(hp.n_expert) + " and expert_used_count " +
           std::to_string(hp.n_expert_used) + " must satisfy 1 <= used <= count <= 1024");
    }
    hp.n_ff_exp = int32_t(hparam_u32_or(f, a + "expert_feed_forward_length", uint32_t(hp.n_ff)));
    if (hp.n_ff_exp <= 0) fail("expert_feed_forward_length must be positive");
  }
}

}  // namespace

uint32_t hparam_u32(const gguf_file& f, const std::string& key) {
  auto v = unwrap(f.get_uint(key));
  if (!v) fail("metadata key '" + key + "' is missing");
  if (*v > 0x7fffffff)
    fail("metadata key '" + key + "' is out of range (" + std::to_string(*v) + ")");
  return uint32_t(*v);
}

uint32_t hparam_u32_or(const gguf_file& f, const std::string& key, uint32_t fallback) {
  auto v = unwrap(f.get_uint(key));
  if (v && *v > 0x7fffffff)
    fail("metadata key '" + key + "' is out of range (" + std::to_string(*v) + ")");
  return v ? uint32_t(*v) : fallback;
}

float hparam_f32_or(const gguf_file& f, const std::string& key, float fallback) {
  auto v = unwrap(f.get_float(key));
  return v ? float(*v) : fallback;
}

result<model_hparams> model_hparams_read(const gguf_file& f) {
  try {
    model_hparams hp;
    auto arch_name = unwrap(f.get_string("general.architecture"));
    if (!arch_name) fail("metadata key 'general.architecture' is missing");
    if (!architecture_for(*arch_name)) {
      fail("architecture '" + *arch_name +
           "' is not supported (supported: " + std::string(supported_architectures()) + ")");
    }
    hp.arch = *arch_name;
    hp.name = unwrap(f.get_string("general.name")).value_or("");
    read_common(f, hp);
    return hp;
  } catch (const std::exception& e) {
    return error{e.what()};
  }
}

}  // namespace hearth
