// The row quantizers are ggml's reference quantizers (ggml-quants.c, quantize_row_*_ref),
// rewritten operation for operation: llama-quantize without an importance matrix calls exactly
// these, and a file is only byte-identical to its output when every float is computed in the
// same order with the same roundings. So expressions below keep ggml's association
// ((w * x) * l, not w * (x * l)), int -> float conversions happen where C's usual arithmetic
// conversions put them, and narrowing casts (to int8_t, uint8_t) sit where ggml has them.
// The K-quants' costly step, fitting each sub-block's scale by trying candidate scales, runs
// 8 sub-blocks per instruction with AVX2 where the CPU has it (quantize-fit-avx2.cpp, x86 only),
// each lane doing exactly the operations of the portable fits here (tests check they agree bit for
// bit). Each type's quantizer is its from_float in engine/io/type-traits.h; quantize_rows
// (quantize.cpp) and everything else reach them there.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/io/cpu-features.h"
#include "engine/io/quantize-fit.h"
#include "engine/io/tensor-type.h"
#include "engine/io/type-rows.h"

// An FMA would round once where ggml rounds twice. The default flags target no FMA (so GCC
// cannot contract); this keeps clang from doing it on a build for a newer CPU.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace hearth {
namespace {

// Below this a group counts as all zeros (ggml's GROUP_MAX_EPS).
constexpr float k_group_max_eps = 1e-15f;

// Round to nearest, ties to even: adding 1.5 * 2^23 leaves the integer in the low mantissa bits
// (for |x| < 2^22). Ties differ from std::lround (away from zero), and the K-quants' choices
// of levels depend on it, so it must be this and not a library round.
inline int nearest_int(float x) {
  const float biased = x + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &biased, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

inline float fp16_round_trip(uint16_t h) {
  return fp16_to_fp32(h);
}

// The value of largest magnitude among x[0, n), with its sign (the first of equal magnitudes):
// Q4_0's and Q5_0's scale maps it to the lowest level.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// The smallest and largest of x[0, n): Q4_1's and Q5_1's levels span them.
inline void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

}  // namespace

// --- 32-value blocks ----------------------------------------------------------------------

namespace {

// The levels (Bits 4 or 5) of Q4_0's and Q5_0's 32 values: the scale maps the value of largest
// magnitude (with its sign) to -2^(Bits-1), so the full range is used on the side where the
// extreme lies. ggml truncates x + 2^(Bits-1) + 0.5 through int8_t (rounding half up), then clamps
// the top. lo/hi: the levels of values j and 16 + j; returns the scale.
template <int Bits>
float levels_0(const float* x, uint8_t lo[16], uint8_t hi[16]) {
  constexpr int top = (1 << Bits) - 1;
  constexpr float mid = float(1 << (Bits - 1));
  const float d = signed_absmax(x, 32) / -mid;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    lo[j] = uint8_t(std::min(top, int(int8_t(x[j] * id + (mid + 0.5f)))));
    hi[j] = uint8_t(std::min(top, int(int8_t(x[16 + j] * id + (mid + 0.5f)))));
  }
  return d;
}

// The levels of Q4_1's and Q5_1's 32 values: their min and max span the 2^Bits levels. Clamped
// as Q4_0's; ggml does not clamp Q5_1's (its largest value lands on 31). lo/hi as levels_0; returns
// the scale, `min` the offset.
template <int Bits, bool Clamp>
float levels_1(const float* x, float& min, uint8_t lo[16], uint8_t hi[16]) {
  constexpr int top = (1 << Bits) - 1;
  float max;
  min_max(x, 32, min, max);
  const float d = (max - min) / top;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  auto level = [&](float v) {
    const float f = (v - min) * id + 0.5f;
    return Clamp ? uint8_t(std::min(top, int(int8_t(f)))) : uint8_t(f);
  };
  for (int j = 0; j < 16; ++j) {
    lo[j] = level(x[j]);
    hi[j] = level(x[16 + j]);
  }
  return d;
}

// Q4_0's and Q4_1's nibbles: value j's low, value 16 + j's high.
void pack_q4_nibbles(const uint8_t lo[16], const uint8_t hi[16], uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(lo[j] | (hi[j] << 4));
}

// The fifth bits of Q5_0/Q5_1: value j's at bit j of a little-endian uint32.
void pack_q5_bits(const uint8_t xi0[16], const uint8_t xi1[16], uint8_t qs[16], uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((xi0[j] & 0x0F) | ((xi1[j] & 0x0F) << 4));
    h |= ((xi0[j] & 0x10u) >> 4) << (j + 0);
    h |= ((xi1[j] & 0x10u) >> 4) << (j + 16);
  }
  for (int b = 0; b < 4; ++b) qh[b] = uint8_t(h >> (8 * b));
}

// Q4_0 and Q5_0 (Bits 4 or 5): levels_0, packed as the block type has it.
template <class Block, int Bits>
void from_float_0(const float* x, void* yv, int64_t n) {
  static_assert(sizeof(Block::qs) == 16);
  auto* y = static_cast<Block*>(yv);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t lo[16], hi[16];
    y[i].d = fp32_to_fp16(levels_0<Bits>(x, lo, hi));
    if constexpr (Bits == 4)
      pack_q4_nibbles(lo, hi, y[i].qs);
    else
      pack_q5_bits(lo, hi, y[i].qs, y[i].qh);
  }
}

// Q4_1 and Q5_1: levels_1, packed as the block type has it.
template <class Block, int Bits, bool Clamp>
void from_float_1(const float* x, void* yv, int64_t n) {
  static_assert(sizeof(Block::qs) == 16);
  auto* y = static_cast<Block*>(yv);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t lo[16], hi[16];
    float min;
    y[i].d = fp32_to_fp16(levels_1<Bits, Clamp>(x, min, lo, hi));
    y[i].m = fp32_to_fp16(min);
    if constexpr (Bits == 4)
      pack_q4_nibbles(lo, hi, y[i].qs);
    else
      pack_q5_bits(lo, hi, y[i].qs, y[i].qh);
  }
}

}  // namespace

static_assert(k_q4_0_block == 32 && k_q4_1_block == 32 && k_q5_0_block == 32 && k_q5_1_block == 32);

void q4_0_from_float(const float* x, void* yv, int64_t n) {
  from_float_0<block_q4_0, 4>(x, yv, n);
}

void q4_1_from_float(const float* x, void* yv, int64_t n) {
  from_float_1<block_q4_1, 4, true>(x, yv, n);
}

void q5_0_from_float(const float* x, void* yv, int64_t n) {
  from_float_0<block_q5_0, 5>(x, yv, n);
}

// ggml does not clamp Q5_1's levels.
void q5_1_from_float(const float* x, void* yv, int64_t n) {
  from_float_1<block_q5_1, 5, false>(x, yv, n);
}

// Q8_0: scale max|x| / 127, round half away from zero (C's roundf).
void q8_0_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<block_q8_0*>(yv);
  constexpr int qk = k_q8_0_block;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float amax = 0.0f;
    for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < qk; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

namespace {

// --- K-quant helpers ------------------------------------------------------------------------

// ggml's make_qx_quants for the unweighted, rmse_type 1 case Q6_K uses: symmetric levels
// [-nmax, nmax - 1] with the extreme at -nmax, then 18 nearby scales tried; the one minimising
// the x²-weighted squared error wins. L gets the levels shifted to [0, 2 nmax). Returns the
// scale (negative when the extreme is positive).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < k_group_max_eps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    // sumlx² / suml2 is the error reduction of the best scale for these levels; compared
    // without dividing, as ggml does.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_qkx2_quants: levels [0, nmax] for x ≈ scale * l - the_min, the min never above 0.
// Starting from the plain min/max fit, nstep + 1 candidate scales around nmax / (max - min)
// are tried; for each the levels are fixed and scale and min are refit by weighted least
// squares, keeping the fit with the smallest weighted squared error. Laux is scratch.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Q4_K/Q5_K's twelve scale bytes: see block_q4_k in engine/io/tensor-type.h.
void pack_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t* scales) {
  if (j < 4) {
    scales[j] = ls;
    scales[j + 4] = lm;
  } else {
    scales[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= uint8_t((ls >> 4) << 6);
    scales[j - 0] |= uint8_t((lm >> 4) << 6);
  }
}

void unpack_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// The part Q4_K and Q5_K share: per 32-value sub-block a scale and min from make_qkx2_quants
// (weighted by rms + |x|, so large values count more), both quantized to 6 bits against the
// super-block's largest, and the values requantized against the scales as stored (F16 d and
// dmin times the 6-bit factors), so that rounding of the scales is not compounded.
template <typename Block>
void quantize_k_scales_and_levels(const float* x, Block& y, int nmax, float rmin, float rdelta,
                                  int nstep, uint8_t L[k_qk_k]) {
  float mins[k_qk_k / 32], scales[k_qk_k / 32];
#if defined(__x86_64__)
  if (cpu_has_avx2()) {
    quant::fit_k_subblocks_avx2(x, nmax, rmin, rdelta, nstep, L, scales, mins);
  } else {
    quant::fit_k_subblocks_portable(x, nmax, rmin, rdelta, nstep, L, scales, mins);
  }
#else
  quant::fit_k_subblocks_portable(x, nmax, rmin, rdelta, nstep, L, scales, mins);
#endif
  float max_scale = 0, max_min = 0;  // the scales are positive: the min is taken off first
  for (int j = 0; j < k_qk_k / 32; ++j) {
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(y.scales, 0, sizeof y.scales);
  for (int j = 0; j < k_qk_k / 32; ++j) {
    // ggml narrows to uint8_t before clamping.
    const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
    pack_scale_min_k4(j, ls, lm, y.scales);
  }
  y.d = fp32_to_fp16(max_scale / 63.f);
  y.dmin = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < k_qk_k / 32; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, y.scales, &sc, &m);
    const float d = fp16_round_trip(y.d) * sc;
    if (d == 0) continue;  // ggml keeps make_qkx2_quants' levels then
    const float dm = fp16_round_trip(y.dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

void q4_k_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<block_q4_k*>(yv);
  uint8_t L[k_qk_k];
  for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
    quantize_k_scales_and_levels(x, y[i], 15, -1.f, 0.1f, 20, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < k_qk_k; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void q5_k_from_float(const float* x, void* yv, int64_t n_values) {
  auto* y = static_cast<block_q5_k*>(yv);
  uint8_t L[k_qk_k];
  for (int64_t i = 0; i < n_values / k_qk_k; ++i, x += k_qk_k) {
    quantize_k_scales_and_levels(x, y[i], 31, -0.5f, 0.1f, 15, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, k_qk_k / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < k_qk_k; n += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
      m1 = uint8_t(m1 << 2);
      m2 = uint8_t(m2 << 2);
    }
  }
}

// Q6_K: per 16-value sub-block a signed scale from make_qx_quants; the scales quantized to
// int8 against the one of largest magnitude (mapped to -128), then the values requantized
// against the stored scales.
void q6_k_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<block_q6_k*>(yv);
  int8_t L[k_qk_k];
  float scales[k_qk_k / 16];
  for (int64_t i = 0; i < n / k_qk_k; ++i, x += k_qk_k) {
    for (int half = 0; half < 2; ++half) {
#if defined(__x86_64__)
      if (cpu_has_avx2()) {
        quant::fit_q6_k_subblocks_avx2(x + 128 * half, L + 128 * half, scales + 8 * half);
        continue;
      }
#endif
      quant::fit_q6_k_subblocks_portable(x + 128 * half, L + 128 * half, scales + 8 * half);
    }
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < k_qk_k / 16; ++ib) {
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < k_group_max_eps) {
      std::memset(&y[i], 0, sizeof(block_q6_k));
      y[i].d = fp32_to_fp16(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < k_qk_k / 16; ++ib)
      y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < k_qk_k / 16; ++j) {
      const float d = fp16_round_trip(y[i].d) * y[i].scales[j];
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < k_qk_k; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

namespace quant {

// One make_qkx2_quants per 32-value sub-block, weighted by the sub-block's rms + |x| so that
// large values count more.
void fit_k_subblocks_portable(const float* x, int nmax, float rmin, float rdelta, int nstep,
                              uint8_t* L, float* scales, float* mins) {
  uint8_t Laux[32];
  float weights[32];
  for (int j = 0; j < k_qk_k / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 rdelta, nstep);
  }
}

void fit_q6_k_subblocks_portable(const float* x, int8_t* L, float* scales) {
  for (int ib = 0; ib < 8; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
}

}  // namespace quant

}  // namespace hearth
