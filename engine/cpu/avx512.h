// What the AVX-512 kernel files share: the target attribute their functions carry (they are
// called only when cpu_has_avx512_vnni()), a lane sum, and the Q8_0 activation quantizer. Include
// it only from those files: it turns off gcc 12's uninitialised-value warnings for the rest of the
// file, because its AVX-512 intrinsics pass an uninitialised placeholder operand
// (_mm512_undefined_*) and warn about it inside the system header; nothing of ours is
// uninitialised.
#pragma once

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/io/tensor-type.h"

#define HEARTH_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace hearth::cpu {

// Sum of the 16 lanes.
HEARTH_AVX512 inline float hsum512(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A register-blocked tile's R × C accumulators, each summed across its lanes, into y: row r of
// token c at y[c * ldy + r]. Always inlined, so each tile kernel compiles as if written in place.
template <int R, int C>
HEARTH_AVX512 __attribute__((always_inline)) inline void store_tile_sums(const __m512 (&acc)[R][C],
                                                                         float* y, int64_t ldy) {
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[c * ldy + r] = hsum512(acc[r][c]);
}

// Lane j of the result is hsum512(v[j]), bit for bit: the 16 sums are taken together, each
// pair of additions hsum512 makes done in the same order (lane i + lane i+8, then + i+4, then
// (0 + 2) + (1 + 3)), with 4 shuffles per 2 vectors instead of 4 per vector and no scalar stores.
HEARTH_AVX512 inline __m512 hsum512_x16(const __m512 v[16]) {
  __m512 r1[8], r2[4], r3[2];
  for (int m = 0; m < 8; ++m) {  // quads 0,1: v[2m]'s lane i + i+8; quads 2,3: v[2m+1]'s
    const __m512 a = v[2 * m], b = v[2 * m + 1];
    r1[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int m = 0; m < 4; ++m) {  // quad k: v[4m + k]'s lanes j + j+4 of the above
    const __m512 x = r1[2 * m], y = r1[2 * m + 1];
    r2[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
  }
  for (int m = 0; m < 2; ++m) {  // quad k: (0 + 2, 1 + 3) of v[8m + k], then of v[8m + 4 + k]
    const __m512d p = _mm512_castps_pd(r2[2 * m]), q = _mm512_castps_pd(r2[2 * m + 1]);
    r3[m] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(p, q)),
                          _mm512_castpd_ps(_mm512_unpackhi_pd(p, q)));
  }
  // Quad k: v[k], v[4 + k], v[8 + k], v[12 + k]; lane 4k + j holds v[4j + k].
  const __m512 sums =
      _mm512_add_ps(_mm512_shuffle_ps(r3[0], r3[1], 0x88), _mm512_shuffle_ps(r3[0], r3[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, sums);
}

// How far ahead a tile asks for weights in L2 (prefetch_l2). The packed Q4_K/Q5_K tiles
// (gemm-q45-k-x16-avx512.cpp) read one contiguous stream per group, and the next group is usually
// the same thread's next work item. With a few tokens per group (several sequences decoding at
// once) the hardware prefetchers alone left them well short of memory speed. Measured with
// kernels_bench on Zen 4, 2 threads, 5632 x 2048, ms per product before -> after (medians of 3):
// Q4_K at 4 tokens 0.256 -> 0.215 and 16 tokens 0.78 -> 0.61; Q5_K 0.56 -> 0.30 and 1.06 -> 0.78.
// 4.7 and 9.5 KiB ahead measured alike, 2.4 KiB gained less. The same prefetch in the Q6_K and
// Q8_0 tiles gained nothing measurable (Q8_0 at 16 tokens lost 1-7%), and with one token it
// slowed Q6_K by 10%. With one token (decoding) the Q4_K/Q5_K tiles prefetch only where
// cpu_decode_prefetch() says (engine/io/cpu-features.h), because the processors disagree. On Zen 5
// (family 26, 2 threads, 8 alternations) Q4_K at one token went from 28-40 to 33-52 GB/s of
// weights (medians 33 -> 46), and TinyLlama Q4_K_M tg64 from 43-52 to 59-64 t/s (4 alternations).
// On Zen 4 (family 25) it went the other way: 1 thread 25.3-26.4 -> 19.7-20.4 GB/s (3
// alternations), and tg64 47.5-64.7 -> 44.5-55.5 t/s, medians 58.2 -> 49.1, slower in each of 7
// alternations. Q5_K at one token measured alike either way on Zen 4. Q6_K and Q8_0 at one token
// measured no gain on Zen 5 either (42 -> 40 and 50 -> 45 GB/s, medians of 6) and are left alone.
constexpr int64_t k_prefetch_ahead = 8 << 10;

// Asks for [p, p + bytes) in L2. Prefetches never fault, so p may run past the weights' end.
inline void prefetch_l2(const void* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64)
    _mm_prefetch(static_cast<const char*>(p) + o, _MM_HINT_T1);
}

// A packed tile's outputs (engine/cpu/gemm.h): acc[h][c] holds rows 16h .. 16h + 15 of token c,
// one row per lane; stored to y[c * ldy + r] for the group's first nr rows only.
template <int H, int C>
HEARTH_AVX512 inline void store_group_rows(const __m512 (&acc)[H][C], float* y, int64_t ldy,
                                           int nr) {
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h) {
    const int left = std::clamp(nr - 16 * h, 0, 16);
    const __mmask16 rows = __mmask16((1u << left) - 1);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy + 16 * h, rows, acc[h][c]);
  }
}

// The 4 bytes at p in every 32-bit lane (vpdpbusd's operand for 4 values of one row).
HEARTH_AVX512 inline __m512i broadcast_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Round half away from zero (std::lround, as quantize_row_q8_0_ref) on 16 lanes:
// trunc(v) plus ±1 where the dropped fraction is at least one half; v - trunc(v) is exact.
HEARTH_AVX512 inline __m512i round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(_mm512_set1_ps(1.0f)),
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(int32_t(0x80000000u)))));
  return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

// 32 activations quantized exactly as the reference engine's Q8_0 (scale max|x|/127, values
// rounded half away from zero): the 32 signed bytes, and in *d the scale as the reference
// multiplies with it (it stores the scale as F16). The 32-value block kernels' activations.
HEARTH_AVX512 inline __m256i quantize_q8_0_block(const float* x, float* d) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float db = amax / 127.0f;
  const float id = db != 0 ? 1.0f / db : 0.0f;
  const __m512 vid = _mm512_set1_ps(id);
  const __m128i b0 = _mm512_cvtepi32_epi8(round_away(_mm512_mul_ps(v0, vid)));
  const __m128i b1 = _mm512_cvtepi32_epi8(round_away(_mm512_mul_ps(v1, vid)));
  *d = fp16_to_fp32(fp32_to_fp16(db));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(b0), b1, 1);
}

}  // namespace hearth::cpu
