// AVX2 versions of vec-dot-legacy.cpp's kernels (x86 only; chosen at run time when
// cpu_has_avx2()): the Q8_1 quantizer, writing the same bytes as the portable one, and the Q4_1,
// Q5_0, Q5_1 and Q8_1 dot products.
#include <cstring>

#include "engine/cpu/avx2.h"
#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

constexpr int k_block = 32;  // every type in this file

}  // namespace

// The same bytes as the portable version: roundf's half-away-from-zero is rebuilt from a
// truncation (x - trunc(x) is exact), since the SIMD round instructions only tie to even.
HEARTH_AVX2 void q8_1_from_float_avx2(const float* x, void* yv, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(yv);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t b = 0; b < n / k_block; ++b, x += k_block) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_mul_ps(v[k], vid);
      const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(s, t));
      const __m256 away = _mm256_or_ps(_mm256_and_ps(s, sign), one);  // ±1 with s's sign
      const __m256 r = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), away));
      q[k] = _mm256_cvtps_epi32(r);
      sum = _mm256_add_epi32(sum, q[k]);
    }
    // int32 -> int8 (the values are in [-127, 127]); packs interleaves 128-bit lanes, the
    // permute puts the 32 bytes back in order.
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), ordered);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    y[b].s = fp32_to_fp16(float(_mm_cvtsi128_si32(s4)) * d);
  }
}

// --- AVX2 dot products -------------------------------------------------------------------

namespace {

// 32 nibbles as bytes in value order: low nibbles (values 0..15) in the low 128-bit lane, high
// nibbles (values 16..31) in the high lane.
HEARTH_AVX2 inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                          _mm256_set1_epi8(0x0F));
}

// Byte j = 0x10 when bit j of the block's qh is set: the fifth bits as a value to OR in.
HEARTH_AVX2 inline __m256i fifth_bits_32(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  // Byte j takes byte j / 8 of h, then tests bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int32_t(h)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Σ q · x over one block as 8 int32 lanes for unsigned q (at most 31) and signed x: maddubs
// cannot saturate (2 · 31 · 127 < 2^15).
HEARTH_AVX2 inline __m256i block_dot_unsigned(__m256i q, const int8_t* x) {
  const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, qx), _mm256_set1_epi16(1));
}

// The same for q - 16: 16 · Σx is taken off the products in 16 bits (both within range).
HEARTH_AVX2 inline __m256i block_dot_offset16(__m256i q, const int8_t* x) {
  const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i p16 =
      _mm256_sub_epi16(_mm256_maddubs_epi16(q, qx), _mm256_maddubs_epi16(_mm256_set1_epi8(16), qx));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

}  // namespace

HEARTH_AVX2 float dot_q4_1_q8_1_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q4_1* w = static_cast<const block_q4_1*>(wv);
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;  // Σ m · s, kept apart so each block adds one scalar
  for (int64_t b = 0; b < n / k_block; ++b) {
    const __m256i s = block_dot_unsigned(nibbles_32(w[b].qs), x[b].qs);
    const __m256 d = _mm256_set1_ps(fp16_to_fp32_f16c(w[b].d) * fp16_to_fp32_f16c(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    mins += fp16_to_fp32_f16c(w[b].m) * fp16_to_fp32_f16c(x[b].s);
  }
  return hsum256(acc) + mins;
}

HEARTH_AVX2 float dot_q5_0_q8_0_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q5_0* w = static_cast<const block_q5_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / k_block; ++b) {
    const __m256i q = _mm256_or_si256(nibbles_32(w[b].qs), fifth_bits_32(w[b].qh));
    const __m256i s = block_dot_offset16(q, x[b].qs);
    const __m256 d = _mm256_set1_ps(fp16_to_fp32_f16c(w[b].d) * fp16_to_fp32_f16c(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum256(acc);
}

HEARTH_AVX2 float dot_q5_1_q8_1_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q5_1* w = static_cast<const block_q5_1*>(wv);
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;
  for (int64_t b = 0; b < n / k_block; ++b) {
    const __m256i q = _mm256_or_si256(nibbles_32(w[b].qs), fifth_bits_32(w[b].qh));
    const __m256i s = block_dot_unsigned(q, x[b].qs);
    const __m256 d = _mm256_set1_ps(fp16_to_fp32_f16c(w[b].d) * fp16_to_fp32_f16c(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    mins += fp16_to_fp32_f16c(w[b].m) * fp16_to_fp32_f16c(x[b].s);
  }
  return hsum256(acc) + mins;
}

HEARTH_AVX2 float dot_q8_1_q8_1_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q8_1* w = static_cast<const block_q8_1*>(wv);
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / k_block; ++b) {
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    // |w| · sign(x, w): maddubs needs one unsigned operand; exact for bytes in [-127, 127].
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    const __m256i s = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    const __m256 d = _mm256_set1_ps(fp16_to_fp32_f16c(w[b].d) * fp16_to_fp32_f16c(x[b].d));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
  }
  return hsum256(acc);
}

}  // namespace hearth::cpu
