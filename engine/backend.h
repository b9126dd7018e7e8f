// The backend seam: every operation of the forward pass goes through this interface, so CUDA and
// Vulkan backends (backends/) can run the same model code. The CPU backend (engine/cpu/) is the
// reference implementation every other backend is compared against (../shared/STYLE.md 3, 12).
//
// Conventions. Tensors are row-major with ne[0] the fastest dimension (as GGUF stores them):
// a matrix of `rows` rows of `cols` values has ne = {cols, rows}. Activations are F32. All ops
// are enqueued in order on the backend; only download() and synchronize() wait for results.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/io/tensor-type.h"

namespace hearth {

struct gguf_tensor;

// A tensor in a backend's memory (host memory for the CPU backend). Copies are views of the same
// memory; the backend that allocated it frees it with free().
struct tensor {
  tensor_type type = tensor_type::f32;
  int64_t ne[4] = {1, 1, 1, 1};
  void* data = nullptr;
  const char* name = "";

  bool present() const { return data != nullptr; }
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t row_bytes() const { return tensor_type_row_bytes(type, ne[0]); }
  int64_t n_bytes() const { return row_bytes() * rows(); }
};

// The first `n_rows` rows of `t` (same memory).
inline tensor tensor_rows(const tensor& t, int64_t n_rows) {
  tensor v = t;
  v.ne[1] = n_rows;
  v.ne[2] = v.ne[3] = 1;
  return v;
}

// Rotary embedding parameters. `neox` pairs dimension i with i + n_dims/2 (Qwen2, Phi-3, Gemma);
// otherwise adjacent pairs (2i, 2i+1) rotate together (llama as GGUF stores it).
//
// YaRN (ext_factor != 0, ggml's rope): the angle of pair i mixes the interpolated angle
// (freq_scale · theta) and the extrapolated one (theta) by ramp(i) · ext_factor, where the ramp
// falls from 1 to 0 between the correction dimensions of beta_fast and beta_slow rotations over
// n_ctx_orig positions, and cos/sin are scaled by attn_factor · (1 + 0.1 · ln(1 / freq_scale)).
// With the defaults (ext_factor 0, attn_factor 1) the rope is the plain (linearly scaled) one.
struct rope_params {
  int32_t n_dims = 0;  // leading dimensions of each head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear scaling: 1 / rope.scaling.factor
  bool neox = false;
  float ext_factor = 0.0f;   // YaRN extrapolation mix; 0: off
  float attn_factor = 1.0f;  // YaRN magnitude multiplier
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;  // YaRN: the context length trained without scaling
};

// What YaRN's rope needs beyond the angle (ggml_rope_yarn_corr_dims and rope_yarn's mscale),
// computed once per call in float as ggml does; the backends all use these.
struct rope_yarn_terms {
  float corr_low = 0.0f, corr_high = 0.0f;  // the ramp's dimensions (pair indices)
  float mscale = 1.0f;                      // cos/sin multiplier
};

inline rope_yarn_terms rope_yarn_terms_of(const rope_params& p) {
  rope_yarn_terms t;
  t.mscale = p.attn_factor;
  if (p.ext_factor == 0.0f) return t;
  constexpr float pi = 3.14159265358979323846f;
  auto corr_dim = [&](float n_rot) {
    return float(p.n_dims) * std::log(float(p.n_ctx_orig) / (n_rot * 2 * pi)) /
           (2 * std::log(p.freq_base));
  };
  t.corr_low = std::max(0.0f, std::floor(corr_dim(p.beta_fast)));
  t.corr_high = std::min(float(p.n_dims - 1), std::ceil(corr_dim(p.beta_slow)));
  t.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  return t;
}

// YaRN's ramp weight of the extrapolated angle for pair i (ggml's rope_yarn_ramp · ext_factor).
inline float rope_yarn_mix(const rope_yarn_terms& t, int32_t i, float ext_factor) {
  const float y = (float(i) - t.corr_low) / std::max(0.001f, t.corr_high - t.corr_low);
  return (1 - std::min(1.0f, std::max(0.0f, y))) * ext_factor;
}

// Attention parameters of one layer.
struct attention_params {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  float scale = 1.0f;    // applied to q·k before softmax
  float softcap = 0.0f;  // > 0: scores = softcap * tanh(scores / softcap)
  int32_t window = 0;    // > 0: a token sees only cells with pos > its pos - window
};

class backend {
 public:
  virtual ~backend() = default;

  // Short name for logs and errors ("cpu", "vulkan", "cuda").
  virtual std::string name() const = 0;

  // Whether a token's results are the same bits whatever other tokens share the call: every op
  // adds each token's terms in one order at every token count, so a sequence's logits, and what
  // it samples, do not depend on what runs beside it in a batch. The CPU backend, and Vulkan on
  // CPU devices, promise it; tests/backend_ops_test.cpp checks it on a device backend that does.
  virtual bool batch_invariant() const { return false; }

  // Whether mul_mat and get_rows accept weights of this type. Models check every weight with it
  // at load so an unsupported type is reported before any work starts.
  virtual bool supports_weight_type(tensor_type t) const = 0;

  // --- memory ---------------------------------------------------------------------------

  // Makes a weight from a mapped file usable by this backend. The CPU backend views the mapped
  // bytes in place; device backends upload them. `t` must outlive the returned tensor.
  virtual tensor weight(const gguf_tensor& t) = 0;
  // A new tensor in backend memory, contents undefined.
  virtual tensor alloc(tensor_type type, int64_t ne0, int64_t ne1, const char* name) = 0;
  // The most bytes one tensor from alloc() may have: a device's largest buffer (128 MiB on
  // lavapipe and on some ARM GPUs), less than a large vocabulary's logits for a whole batch, so
  // the context keeps its logits within it. Weights may be larger (a device holds them in parts).
  virtual uint64_t max_alloc_bytes() const { return UINT64_MAX; }
  // Releases a tensor from alloc() (weights are released with the backend).
  virtual void free(tensor& t) = 0;
  // Host -> tensor and tensor -> host copies of the first `bytes` bytes.
  virtual void upload(const tensor& dst, const void* src, size_t bytes) = 0;
  virtual void download(const tensor& src, void* dst, size_t bytes) = 0;
  // Waits for all enqueued work. Optional: the CPU backend runs ops synchronously.
  virtual void synchronize() {}

  // --- ops --------------------------------------------------------------------------------

  // out[i, :] = table[ids[i], :] as F32. table: any supported weight type [n_rows, cols];
  // ids: I32 [n]; out: F32 [n, cols].
  virtual void get_rows(const tensor& table, const tensor& ids, const tensor& out) = 0;

  // out = x · wᵀ (+ bias): w [n_out, n_in] of a weight type; x F32 [n_tok, n_in];
  // bias F32 [n_out] or absent; out F32 [n_tok, n_out]. Activations may be rounded to the
  // weight's dot-product type first (F16, BF16 or 8-bit blocks), as the reference engine does.
  virtual void mul_mat(const tensor& w, const tensor& x, const tensor* bias, const tensor& out) = 0;

  // Several products of the same activations (q, k and v; gate and up): each
  // products[i].out = x · products[i].wᵀ (+ bias), exactly as mul_mat computes it. A backend may
  // run them as one job: the CPU backend rounds x once per dot-product type and splits all the
  // products' rows among its threads in one pass, which a decoding step, made of short
  // products, each ending in a wait for the slowest thread, feels. By default, mul_mat in turn.
  struct product {
    const tensor* w;
    const tensor* bias;  // or nullptr
    const tensor* out;
  };
  virtual void mul_mats(const tensor& x, std::span<const product> products) {
    for (const product& p : products) mul_mat(*p.w, x, p.bias, *p.out);
  }

  // out[i] = x[i] / sqrt(mean(x[i]²) + eps) * weight. x, out: F32 [n, cols]; weight F32 [cols].
  virtual void rms_norm(const tensor& x, const tensor& weight, float eps, const tensor& out) = 0;

  // Rotates each head of x in place. x: F32 [n_tok, n_head * head_dim]; pos: I32 [n_tok];
  // freq_factors: F32 [n_dims / 2] dividing each frequency, or absent.
  virtual void rope(const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
                    const rope_params& p, const tensor* freq_factors) = 0;

  // cache[cells[i], :] = src[i, :], converting to the cache's type. src: F32 [n_tok, cols];
  // cells: I32 [n_tok]; cache: F16 or F32 [n_cells, cols].
  virtual void kv_store(const tensor& src, const tensor& cells, const tensor& cache) = 0;

  // Causal attention over the cache for a batch of tokens of possibly different sequences.
  // q: F32 [n_tok, n_head * head_dim_k]; k_cache: [n_cells, n_head_kv * head_dim_k];
  // v_cache: [n_cells, n_head_kv * head_dim_v]; tok_seq, tok_pos: I32 [n_tok];
  // cell_seq, cell_pos: I32 [n_cells] (seq -1 = empty). Token t sees cell c when the sequences
  // match and cell_pos[c] <= tok_pos[t] (and within the window). Only the first `n_cells` cells
  // are scanned. The mask is derived from these on every call: nothing about it is cached.
  // out: F32 [n_tok, n_head * head_dim_v].
  virtual void attention(const tensor& q, const tensor& k_cache, const tensor& v_cache,
                         const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                         const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                         const tensor& out) = 0;

  // out = silu(gate) * up, elementwise; all F32 of one shape.
  virtual void swiglu(const tensor& gate, const tensor& up, const tensor& out) = 0;

  // out = gelu(gate) * up, elementwise, GELU in its tanh form; all F32 of one shape (Gemma).
  virtual void geglu(const tensor& gate, const tensor& up, const tensor& out) = 0;

  // out = a + b, elementwise; all F32 of one shape.
  virtual void add(const tensor& a, const tensor& b, const tensor& out) = 0;

  // out = x * s, elementwise; F32 of one shape (Gemma's embedding scale).
  virtual void scale(const tensor& x, float s, const tensor& out) = 0;

  // out = cap * tanh(x / cap), elementwise; F32 of one shape (Gemma 2's final logits).
  virtual void softcap(const tensor& x, float cap, const tensor& out) = 0;

  // --- mixture of experts ------------------------------------------------------------------
  // A mixture-of-experts feed-forward (Mixtral, Qwen3-MoE) is: router logits (mul_mat) ->
  // moe_route -> mul_mat_id (gate, up) -> swiglu -> mul_mat_id (down) -> moe_combine. The k
  // chosen slots of token t are rows t*k .. t*k+k-1 of the expert activations.

  // The router: per token, softmax over its n_expert logits (in F32, max subtracted), the k
  // experts of highest probability in decreasing order (equal probabilities: the lower expert
  // id first), and their probabilities, each divided by the sum of the k when `normalize`.
  // logits: F32 [n_tok, n_expert]; ids: I32 [n_tok, k]; weights: F32 [n_tok, k].
  virtual void moe_route(const tensor& logits, bool normalize, const tensor& ids,
                         const tensor& weights) = 0;

  // The expert product: out[t*k + j, :] = x[r, :] · w[ids[t, j]]ᵀ, with r = t when x has n_tok
  // rows (each chosen expert reads the token's row) and r = t*k + j when it has n_tok*k rows.
  // w: n_expert matrices [n_out, n_in] of a weight type, ne = {n_in, n_out, n_expert}; ids: I32
  // [n_tok, k] with every id in [0, n_expert); out: F32 [n_tok*k, n_out]. Rounds activations as
  // mul_mat does, so each row equals mul_mat with that expert's matrix. Only the experts some
  // token chose are read, each once per call: the rows are grouped by expert.
  virtual void mul_mat_id(const tensor& w, const tensor& x, const tensor& ids,
                          const tensor& out) = 0;

  // out[t, :] = Σ_j weights[t, j] * x[t*k + j, :], the products summed in order j = 0 .. k-1.
  // x: F32 [n_tok*k, cols]; weights: F32 [n_tok, k]; out: F32 [n_tok, cols].
  virtual void moe_combine(const tensor& x, const tensor& weights, const tensor& out) = 0;
};

// The CPU backend with `n_threads` threads (<= 0: one per hardware thread).
std::unique_ptr<backend> make_cpu_backend(int n_threads);

}  // namespace hearth
