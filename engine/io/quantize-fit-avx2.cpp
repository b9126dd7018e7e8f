// AVX2 sub-block fits for the K-quants (engine/io/quantize-fit.h): 8 sub-blocks per instruction.
// Each lane runs the scalar algorithm of quantize-row.cpp: the same IEEE operations (mul, add, sub,
// div, sqrt, compares) on the same operands in the same order, with branches turned into
// per-lane blends, so every lane's result is bit-identical to the scalar fit. Nothing here may
// be reassociated or fused: no horizontal sums, no FMA.
#include <immintrin.h>

#include <cmath>

#include "engine/io/quantize-fit.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

// Only with AVX2 (quantize-row.cpp asks engine/io/cpu-features.h: cpu_has_avx2). No FMA on purpose.
#define HEARTH_AVX2_NO_FMA __attribute__((target("avx2")))

namespace hearth::quant {
namespace {

// ggml's nearest_int, lane-wise: 1.5·2^23 added, the integer read from the mantissa bits.
HEARTH_AVX2_NO_FMA inline __m256i nearest_int8(__m256 v) {
  const __m256 biased = _mm256_add_ps(v, _mm256_set1_ps(12582912.f));
  const __m256i bits = _mm256_castps_si256(biased);
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                          _mm256_set1_epi32(0x00400000));
}

HEARTH_AVX2_NO_FMA inline __m256i clamp8(__m256i l, int lo, int hi) {
  return _mm256_max_epi32(_mm256_set1_epi32(lo), _mm256_min_epi32(_mm256_set1_epi32(hi), l));
}

HEARTH_AVX2_NO_FMA inline __m256 select(__m256 if_false, __m256 if_true, __m256 mask) {
  return _mm256_blendv_ps(if_false, if_true, mask);
}

HEARTH_AVX2_NO_FMA inline __m256i select_i(__m256i if_false, __m256i if_true, __m256 mask) {
  return _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(if_false), _mm256_castsi256_ps(if_true), mask));
}

}  // namespace

// make_qkx2_quants per lane (see quantize-row.cpp); xt[i] holds value i of the 8 sub-blocks.
HEARTH_AVX2_NO_FMA void fit_k_subblocks_avx2(const float* x, int nmax, float rmin, float rdelta,
                                             int nstep, uint8_t* L, float* scales, float* mins) {
  constexpr int n = 32;
  __m256 xt[n], wt[n];
  const __m256i lane_offsets = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
  for (int i = 0; i < n; ++i) xt[i] = _mm256_i32gather_ps(x + i, lane_offsets, 4);
  const __m256 sign = _mm256_set1_ps(-0.0f), zero = _mm256_setzero_ps();

  // Weights av_x + |x|, av_x the sub-block's rms.
  __m256 sum_x2 = zero;
  for (int i = 0; i < n; ++i) sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(xt[i], xt[i]));
  const __m256 av_x = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32.0f)));
  for (int i = 0; i < n; ++i) wt[i] = _mm256_add_ps(av_x, _mm256_andnot_ps(sign, xt[i]));

  __m256 min = xt[0], max = xt[0];
  __m256 sum_w = wt[0];
  __m256 sum_x = _mm256_mul_ps(sum_w, xt[0]);
  for (int i = 1; i < n; ++i) {
    min = _mm256_min_ps(xt[i], min);  // x < min ? x : min
    max = _mm256_max_ps(xt[i], max);  // x > max ? x : max
    sum_w = _mm256_add_ps(sum_w, wt[i]);
    sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(wt[i], xt[i]));
  }
  min = select(min, zero, _mm256_cmp_ps(min, zero, _CMP_GT_OQ));
  // Flat sub-blocks stop here in the scalar code; their lanes run on and are overwritten.
  const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ);
  const __m256 flat_min = min;

  const __m256 fnmax = _mm256_set1_ps(float(nmax));
  __m256 iscale = _mm256_div_ps(fnmax, _mm256_sub_ps(max, min));
  __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
  __m256i lv[n], laux[n];
  __m256 best_error = zero;
  for (int i = 0; i < n; ++i) {
    lv[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xt[i], min))), 0, nmax);
    const __m256 diff =
        _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(lv[i])), min), xt[i]);
    best_error = _mm256_add_ps(best_error, _mm256_mul_ps(wt[i], _mm256_mul_ps(diff, diff)));
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = _mm256_div_ps(_mm256_set1_ps(rmin + rdelta * float(is) + float(nmax)),
                           _mm256_sub_ps(max, min));
    __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; ++i) {
      laux[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, _mm256_sub_ps(xt[i], min))), 0, nmax);
      const __m256 l = _mm256_cvtepi32_ps(laux[i]);
      const __m256 wl = _mm256_mul_ps(wt[i], l);
      sum_l = _mm256_add_ps(sum_l, wl);
      sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, l));
      sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xt[i]));
    }
    const __m256 D = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
    const __m256 solvable = _mm256_cmp_ps(D, zero, _CMP_GT_OQ);
    if (_mm256_movemask_ps(solvable) == 0) continue;
    __m256 this_scale =
        _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), D);
    __m256 this_min =
        _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), D);
    const __m256 positive_min = _mm256_cmp_ps(this_min, zero, _CMP_GT_OQ);
    this_min = select(this_min, zero, positive_min);
    this_scale = select(this_scale, _mm256_div_ps(sum_xl, sum_l2), positive_min);
    __m256 cur_error = zero;
    for (int i = 0; i < n; ++i) {
      const __m256 diff = _mm256_sub_ps(
          _mm256_add_ps(_mm256_mul_ps(this_scale, _mm256_cvtepi32_ps(laux[i])), this_min), xt[i]);
      cur_error = _mm256_add_ps(cur_error, _mm256_mul_ps(wt[i], _mm256_mul_ps(diff, diff)));
    }
    const __m256 take = _mm256_and_ps(solvable, _mm256_cmp_ps(cur_error, best_error, _CMP_LT_OQ));
    if (_mm256_movemask_ps(take) == 0) continue;
    for (int i = 0; i < n; ++i) lv[i] = select_i(lv[i], laux[i], take);
    best_error = select(best_error, cur_error, take);
    scale = select(scale, this_scale, take);
    min = select(min, this_min, take);
  }
  scale = select(scale, zero, flat);
  min = select(min, flat_min, flat);
  alignas(32) float s[8], m[8];
  _mm256_store_ps(s, scale);
  _mm256_store_ps(m, _mm256_xor_ps(min, sign));  // the_min = -min
  alignas(32) int32_t l[8];
  for (int i = 0; i < n; ++i) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(l),
                       select_i(lv[i], _mm256_setzero_si256(), flat));
    for (int j = 0; j < 8; ++j) L[32 * j + i] = uint8_t(l[j]);
  }
  for (int j = 0; j < 8; ++j) scales[j] = s[j], mins[j] = m[j];
}

// make_qx_quants(16, 32, x, L, rmse_type 1, no weights) per lane (see quantize-row.cpp).
HEARTH_AVX2_NO_FMA void fit_q6_k_subblocks_avx2(const float* x, int8_t* L, float* scales) {
  constexpr int n = 16, nmax = 32;
  __m256 xt[n], wt[n];
  const __m256i lane_offsets = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  for (int i = 0; i < n; ++i) xt[i] = _mm256_i32gather_ps(x + i, lane_offsets, 4);
  const __m256 sign = _mm256_set1_ps(-0.0f), zero = _mm256_setzero_ps();

  __m256 amax = zero, max = zero;
  for (int i = 0; i < n; ++i) {
    const __m256 ax = _mm256_andnot_ps(sign, xt[i]);
    const __m256 larger = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
    amax = select(amax, ax, larger);
    max = select(max, xt[i], larger);
    wt[i] = _mm256_mul_ps(xt[i], xt[i]);
  }
  const __m256 all_zero = _mm256_cmp_ps(amax, _mm256_set1_ps(1e-15f), _CMP_LT_OQ);

  __m256i lv[n], laux[n];
  __m256 iscale = _mm256_div_ps(_mm256_set1_ps(float(-nmax)), max);
  __m256 sumlx = zero, suml2 = zero;
  for (int i = 0; i < n; ++i) {
    lv[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, xt[i])), -nmax, nmax - 1);
    const __m256 l = _mm256_cvtepi32_ps(lv[i]);
    sumlx = _mm256_add_ps(sumlx, _mm256_mul_ps(_mm256_mul_ps(wt[i], xt[i]), l));
    suml2 = _mm256_add_ps(suml2, _mm256_mul_ps(_mm256_mul_ps(wt[i], l), l));
  }
  __m256 scale = select(zero, _mm256_div_ps(sumlx, suml2), _mm256_cmp_ps(suml2, zero, _CMP_NEQ_UQ));
  __m256 best = _mm256_mul_ps(scale, sumlx);
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = _mm256_div_ps(_mm256_set1_ps(-(float(nmax) + 0.1f * float(is))), max);
    sumlx = suml2 = zero;
    for (int i = 0; i < n; ++i) {
      laux[i] = clamp8(nearest_int8(_mm256_mul_ps(iscale, xt[i])), -nmax, nmax - 1);
      const __m256 l = _mm256_cvtepi32_ps(laux[i]);
      sumlx = _mm256_add_ps(sumlx, _mm256_mul_ps(_mm256_mul_ps(wt[i], xt[i]), l));
      suml2 = _mm256_add_ps(suml2, _mm256_mul_ps(_mm256_mul_ps(wt[i], l), l));
    }
    const __m256 take = _mm256_and_ps(
        _mm256_cmp_ps(suml2, zero, _CMP_GT_OQ),
        _mm256_cmp_ps(_mm256_mul_ps(sumlx, sumlx), _mm256_mul_ps(best, suml2), _CMP_GT_OQ));
    if (_mm256_movemask_ps(take) == 0) continue;
    for (int i = 0; i < n; ++i) lv[i] = select_i(lv[i], laux[i], take);
    const __m256 new_scale = _mm256_div_ps(sumlx, suml2);
    scale = select(scale, new_scale, take);
    best = select(best, _mm256_mul_ps(new_scale, sumlx), take);
  }
  scale = select(scale, zero, all_zero);
  alignas(32) float s[8];
  _mm256_store_ps(s, scale);
  alignas(32) int32_t l[8];
  const __m256i offset = _mm256_set1_epi32(nmax);
  for (int i = 0; i < n; ++i) {
    const __m256i stored =
        select_i(_mm256_add_epi32(lv[i], offset), _mm256_setzero_si256(), all_zero);
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), stored);
    for (int j = 0; j < 8; ++j) L[16 * j + i] = int8_t(l[j]);
  }
  for (int j = 0; j < 8; ++j) scales[j] = s[j];
}

}  // namespace hearth::quant
