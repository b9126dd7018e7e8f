// The scalar math the attention, rope and elementwise kernels share with the host: the mask
// rule, the score (scale, soft-cap), the softmax's running max and sum and its weights, the
// flash-decoding split of the cells, the rope angle and the reference GELU. Each follows the CPU
// backend (engine/cpu/*.cpp) expression for expression, so attention-math_test.cpp can check them
// on a machine without a GPU against the CPU backend itself. Plain C++ when not compiled by nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu/cuda/hd.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#else
#include "engine/io/tensor-type.h"
#endif

namespace hearth::cuda {

// The largest head_dim_k / head_dim_v the attention kernels take (Gemma's 256).
constexpr int32_t k_attention_max_head_dim = 256;
// Batches of at most this many tokens take the flash-decoding path (split cells, then combine);
// larger ones the tiled prompt path.
constexpr int64_t k_attention_decode_max_tokens = 8;
// Flash-decoding: one split per this many cells of the cache's size, at most
// k_attention_max_splits.
constexpr int32_t k_attention_split_cells = 256;
constexpr int32_t k_attention_max_splits = 32;

// --- attention ----------------------------------------------------------------------------

// Whether a token sees a cell (engine/cpu/attention.cpp): same sequence, not in the token's
// future, and within the sliding window when there is one. Empty cells have seq -1.
HEARTH_HD bool attention_visible(int32_t cell_seq, int32_t cell_pos, int32_t tok_seq,
                                 int32_t tok_pos, int32_t window) {
  return cell_seq == tok_seq && cell_pos <= tok_pos && (window <= 0 || tok_pos - cell_pos < window);
}

// The score of one (token, cell) pair from q·k: scaled, then soft-capped as the CPU does
// (a division by the cap, tanh, a multiplication by it).
HEARTH_HD float attention_score(float dot, float scale, float softcap) {
  float s = dot * scale;
  if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
  return s;
}

// exp(x - m) for x <= m: a softmax weight (x a score, m the running max) or the factor that
// rescales a partial state with max x to the larger max m. x = -inf (a masked score, or a state
// that has seen nothing) gives 0, also when m is still -inf (where exp(x - m) is NaN).
HEARTH_HD float softmax_exp(float x, float m) {
  return x == -INFINITY ? 0.0f : expf(x - m);
}

// Merging two partial softmax states a and b over disjoint cells. A state is a running max m,
// sum l = Σ exp(s - m) and unnormalized output o = Σ exp(s - m) · v; m = -inf, l = 0, o = 0 has
// seen nothing, and one score s alone is the state (s, 1, v). With m = max(a.m, b.m) the merged
// state is (m, a.l·fa + b.l·fb, a.o·fa + b.o·fb).
struct softmax_merge_factors {
  float m;
  float fa;
  float fb;
};

HEARTH_HD softmax_merge_factors softmax_merge(float ma, float mb) {
  const float m = fmaxf(ma, mb);
  return {m, softmax_exp(ma, m), softmax_exp(mb, m)};
}

// The cells [begin, end) that split `split` of `n_split` scans when the cache holds n_cells:
// equal chunks of ceil(n_cells / n_split), the last ones short or empty.
struct cell_range {
  int32_t begin;
  int32_t end;
};

// The flash-decoding split count for a cache of max_cells cells (fixed per cache, so a captured
// launch stays valid as the cache fills).
HEARTH_HD int32_t attention_split_count(int32_t max_cells) {
  const int32_t n = (max_cells + k_attention_split_cells - 1) / k_attention_split_cells;
  return n < 1 ? 1 : (n > k_attention_max_splits ? k_attention_max_splits : n);
}

HEARTH_HD cell_range attention_split_range(int32_t n_cells, int32_t n_split, int32_t split) {
  const int32_t chunk = (n_cells + n_split - 1) / n_split;
  const int64_t begin = int64_t(split) * chunk;
  const int64_t end = begin + chunk;
  return {int32_t(begin < n_cells ? begin : n_cells), int32_t(end < n_cells ? end : n_cells)};
}

// The row stride, in floats, of a tile of rows of d values in shared memory that keeps 32
// lanes each reading its own row at the same column free of bank conflicts: d when d is a
// multiple of 32 (the column is then XOR-swizzled by the row, attention_tile_xor), else odd.
HEARTH_HD int32_t attention_tile_stride(int32_t d) {
  return d % 32 == 0 ? d : (d | 1);
}
// The mask ANDed with the row index to swizzle columns: 31 for the swizzled layout, else 0.
HEARTH_HD int32_t attention_tile_xor(int32_t d) {
  return d % 32 == 0 ? 31 : 0;
}

// x rounded to F16 (nearest even) and back: q and the GELU input/output as the CPU rounds them.
HEARTH_HD float round_f16(float x) {
#ifdef __CUDACC__
  return __half2float(__float2half_rn(x));
#else
  return fp16_to_fp32(fp32_to_fp16(x));
#endif
}

// The weight of a visible cell's score s once the whole softmax is known (its max m and the
// inverse of its sum, inv): exp(s - m)·inv, rounded to F16 for an F16 V cache, as the CPU rounds
// the weights before the V product. So the kernels take two passes over the cells (the max and
// sum, then the weights and Σ w·v) rather than one online pass: an online pass never holds a
// final weight to round, and its output then differed from the CPU's by F16's rounding (NMSE
// ~1e-7), which the next product's rounded activations (Q8_0, Q8_K) turned into 1e-5 and a
// mixture-of-experts router into a different expert (NMSE 0.07 in the logits, on an H200).
HEARTH_HD float softmax_weight(float s, float m, float inv, bool round_to_f16) {
  const float w = softmax_exp(s, m) * inv;
  return round_to_f16 ? round_f16(w) : w;
}

// --- rope ---------------------------------------------------------------------------------

// freq_base^(-2/n_dims) in float, the CPU's expression; the rope kernel takes it from the host.
HEARTH_HD float rope_theta_scale(float freq_base, int32_t n_dims) {
  return powf(freq_base, -2.0f / float(n_dims));
}

// The angle of rotated pair i at position pos (engine/cpu/rope.cpp): pos · theta_scale^i by
// repeated multiplication in float, freq_scale · (that / ff[i]).
HEARTH_HD float rope_angle(int32_t pos, float theta_scale, int32_t i, float freq_scale,
                           const float* freq_factors) {
  float theta = float(pos);
  for (int32_t k = 0; k < i; ++k) theta *= theta_scale;
  return freq_scale * (freq_factors ? theta / freq_factors[i] : theta);
}

// --- elementwise --------------------------------------------------------------------------

HEARTH_HD float silu_mul(float g, float u) {
  return g / (1.0f + expf(-g)) * u;
}

// GELU as the CPU computes it (engine/cpu/elementwise.cpp): the input rounded to F16, GELU in
// its tanh form of that, the result rounded to F16; exact beyond ±10.
HEARTH_HD float gelu_reference(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  constexpr float k_sqrt_2_over_pi = 0.79788456080286535587989211986876f;
  constexpr float k_coef_a = 0.044715f;
  const float h = round_f16(x);
  return round_f16(0.5f * h * (1.0f + tanhf(k_sqrt_2_over_pi * h * (1.0f + k_coef_a * h * h))));
}

}  // namespace hearth::cuda
