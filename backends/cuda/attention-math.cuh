// The scalar math the attention, rope and elementwise kernels share with the host: the mask
// rule, the score (its dot product in the CPU's order, scale, soft-cap), the softmax's exp, sum
// and weights, the flash-decoding split of the cells, the rope angle and the reference GELU. Each
// follows the CPU backend (engine/cpu/*.cpp) expression for expression, so
// attention-math_test.cpp can check them on a machine without a GPU against the CPU backend
// itself. Plain C++ when not compiled by nvcc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cuda/hd.h"
#include "backends/cuda/quant.cuh"

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

// x rounded to F16 (nearest even) and back: q and the GELU input/output as the CPU rounds them.
HEARTH_HD float round_f16(float x) {
#ifdef __CUDACC__
  return __half2float(__float2half_rn(x));
#else
  return fp16_to_fp32(fp32_to_fp16(x));
#endif
}

// The softmax the CPU computes (engine/cpu/attention.cpp, its AVX-512 path), operation for
// operation, so that each weight it rounds to F16 rounds the same way:
//   max M over the visible scores; e = attention_exp(s - M) for each; sum Σ e in double;
//   inv = float(1 / sum); weight = e·inv, rounded to F16 for an F16 V cache.
// The kernels take three passes over the cells for it (the max, the sum, the weights and Σ w·v).
// An online softmax (one pass, rescaling as the max grows) computes other sums and never holds a
// final weight to round: its output was F16's rounding (NMSE ~1e-7) from the CPU's, which the next
// product's rounded activations (Q8_0, Q8_K) grew to 1e-5 and a mixture-of-experts router turned
// into another expert (NMSE 0.07 in the logits, on an H200). Two passes with expf, a float sum
// and the scores summed in another order still left a few weights rounding the other way
// (attention output NMSE up to 1.5e-7 in a layer whose inputs were 1e-13 apart), enough to flip
// a greedy token at a near-tie (the synthetic Mixtral F16 file). As it is now, the kernels'
// algorithm is 5e-14 from the CPU backend (attention-math_test) and that token matches.

// q·k as the CPU sums it: 16 partial sums, lane l over dimensions l, l + 16, ... in order (a
// product, then fused multiply-adds), added pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1); dimensions
// past the last whole 16 summed apart and added last. k(d) and q(d) give dimension d.
template <typename K, typename Q>
HEARTH_HD float attention_dot(const K& k, const Q& q, int32_t dk) {
  const int32_t whole = dk / 16 * 16;
  float p[16];
  for (int l = 0; l < 16; ++l) p[l] = whole > 0 ? k(l) * q(l) : 0.0f;
  for (int32_t c = 16; c < whole; c += 16) {
    for (int l = 0; l < 16; ++l) p[l] = fmaf(k(c + l), q(c + l), p[l]);
  }
  float tail = 0.0f;
  for (int32_t d = whole; d < dk; ++d) tail = fmaf(k(d), q(d), tail);
  for (int w = 8; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) p[l] += p[l + w];
  }
  return p[0] + tail;
}

// exp(x) for x <= 0 as the CPU's exp_neg16: x = n·ln 2 + r (n to nearest, ln 2 in two parts),
// Cephes' degree-6 polynomial in fused multiply-adds, 2^n put into the exponent bits; 0 below
// -87 (and for x = -inf).
HEARTH_HD float attention_exp(float x) {
  constexpr float k_log2e = 1.44269504088896341f;
  constexpr float k_ln2_hi = 0.693359375f, k_ln2_lo = -2.12194440e-4f;
  constexpr float k_min = -87.0f;
  const bool tiny = x < k_min;
  x = tiny ? k_min : x;
  const float n = rintf(x * k_log2e);
  float r = fmaf(-n, k_ln2_hi, x);
  r = fmaf(-n, k_ln2_lo, r);
  float y = 1.9875691500e-4f;
  y = fmaf(y, r, 1.3981999507e-3f);
  y = fmaf(y, r, 8.3334519073e-3f);
  y = fmaf(y, r, 4.1665795894e-2f);
  y = fmaf(y, r, 1.6666665459e-1f);
  y = fmaf(y, r, 5.0000001201e-1f);
  y = fmaf(y * r, r, r + 1.0f);
  const float scale = f32_bits_to_float(uint32_t(int32_t(n) + 127) << 23);
  return tiny ? 0.0f : y * scale;
}

// 1 / sum, as the CPU takes it: in double, then float.
HEARTH_HD float attention_inv_sum(double sum) {
  return sum > 0.0 ? float(1.0 / sum) : 0.0f;
}

// The weight of a visible cell whose score s is e = attention_exp(s - M): e·inv, rounded to F16
// for an F16 V cache as the CPU rounds it before the V product.
HEARTH_HD float attention_weight(float e, float inv, bool round_to_f16) {
  const float w = e * inv;
  return round_to_f16 ? round_f16(w) : w;
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
