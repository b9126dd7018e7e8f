// The K-quants (Q4_K, Q5_K, Q6_K) and their activation type Q8_K: the Q8_K quantizer and dot
// products of weight super-blocks with Q8_K activations. Each dot sums the integer products of
// one super-block exactly, then scales once in F32, as ggml's CPU backend does
// (ggml-cpu-quants.c); block layouts are in engine/io/tensor-type.h, dequantization in
// engine/io/dequantize.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

constexpr int k_chunk = 64;  // Q4_K/Q5_K: 64 values share 32 bytes of nibbles

// ggml's nearest_int: round half to even through the float mantissa (|v| < 2^22).
inline int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &shifted, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

// --- Q8_K activations ---------------------------------------------------------------------

// quantize_row_q8_K_ref: the value of largest magnitude (sign kept) becomes -127.
void q8_k_from_float(const float* x, void* yv, int64_t n) {
  block_q8_k* y = static_cast<block_q8_k*>(yv);
  for (int64_t b = 0; b < n / k_qk_k; ++b, x += k_qk_k) {
    float max = 0, amax = 0;
    for (int i = 0; i < k_qk_k; ++i) {
      const float ax = std::fabs(x[i]);
      if (ax > amax) amax = ax, max = x[i];
    }
    if (amax == 0) {
      std::memset(&y[b], 0, sizeof(block_q8_k));
      continue;
    }
    const float iscale = -127.f / max;
    for (int i = 0; i < k_qk_k; ++i) y[b].qs[i] = int8_t(std::min(127, nearest_int(iscale * x[i])));
    for (int j = 0; j < k_qk_k / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
      y[b].bsums[j] = int16_t(sum);
    }
    y[b].d = 1 / iscale;
  }
}

// --- portable dot products ----------------------------------------------------------------

// Q4_K and Q5_K share their layout of scales, mins and low nibbles; Q5_K adds a fifth bit per
// value from qh (bit 2c of qh[l] for the low nibbles of chunk c, bit 2c + 1 for the high).
template <typename Block>
float dot_q45_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  constexpr bool k_fifth_bit = std::is_same_v<Block, block_q5_k>;
  const Block* w = static_cast<const Block*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    uint8_t sm[16];
    k_scales_mins(w[b].scales, sm);
    int32_t sumi = 0;
    for (int c = 0; c < k_qk_k / k_chunk; ++c) {
      const uint8_t* q = w[b].qs + 32 * c;
      const int8_t* q8 = x[b].qs + k_chunk * c;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        int ql = q[l] & 0xF, qh = q[l] >> 4;
        if constexpr (k_fifth_bit) {
          ql |= ((w[b].qh[l] >> (2 * c)) & 1) << 4;
          qh |= ((w[b].qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        lo += ql * q8[l];
        hi += qh * q8[32 + l];
      }
      sumi += sm[2 * c] * lo + sm[2 * c + 1] * hi;
    }
    int32_t summ = 0;  // Σ min[s] · Σ q8 over sub-block s
    for (int j = 0; j < k_qk_k / 16; ++j) summ += sm[8 + j / 2] * x[b].bsums[j];
    const float d = x[b].d * t[w[b].d], dmin = x[b].d * t[w[b].dmin];
    sum += d * float(sumi) - dmin * float(summ);
  }
  return sum;
}

float dot_q4_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q45_k_q8_k_generic<block_q4_k>(n, wv, xv);
}

float dot_q5_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q45_k_q8_k_generic<block_q5_k>(n, wv, xv);
}

float dot_q6_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  const block_q6_k* w = static_cast<const block_q6_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    int32_t sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* sc = w[b].scales + 8 * h;
      const int8_t* q8 = x[b].qs + 128 * h;
      for (int g = 0; g < 4; ++g) {  // 32 values: two sub-blocks of 16
        const uint8_t* low = ql + 32 * (g & 1);
        const int shift = 4 * (g >> 1);
        for (int k = 0; k < 2; ++k) {
          int32_t s = 0;
          for (int l = 16 * k; l < 16 * k + 16; ++l) {
            const int q = (((low[l] >> shift) & 0xF) | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
            s += q * q8[32 * g + l];
          }
          sumi += sc[2 * g + k] * s;
        }
      }
    }
    sum += x[b].d * t[w[b].d] * float(sumi);
  }
  return sum;
}

float dot_q8_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  const block_q8_k* w = static_cast<const block_q8_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    int32_t s = 0;
    for (int i = 0; i < k_qk_k; ++i) s += int32_t(w[b].qs[i]) * int32_t(x[b].qs[i]);
    sum += w[b].d * x[b].d * float(s);
  }
  return sum;
}

// --- AVX2 dot products ----------------------------------------------------------------------
// maddubs multiplies unsigned weight values (at most 63) by signed activation bytes (|q8| <= 127)
// and adds pairs into int16 without saturating (2·63·127 < 32767); madd then applies the
// sub-block scale and widens to int32.

namespace {

HEARTH_AVX2 inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// The int16 in lane s of each 128-bit half of `v`, in every lane.
HEARTH_AVX2 inline __m256i broadcast_i16(__m256i v, int s) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(int16_t(((2 * s + 1) << 8) | (2 * s))));
}

HEARTH_AVX2 inline float hsum128(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  v = _mm_add_ss(v, _mm_movehdup_ps(v));
  return _mm_cvtss_f32(v);
}

// Q4_K and Q5_K share everything but where the values come from: `values::get(w, c, lo, hi)`
// yields the 32 unsigned bytes of the first and second half of 64-value chunk c.
template <typename values, typename block>
HEARTH_AVX2 inline float dot_k_scale_min_avx2(int64_t n, const block* w, const block_q8_k* x) {
  const auto& t = fp16_table();
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    alignas(16) uint8_t sm[16];
    k_scales_mins(w[b].scales, sm);
    const __m256i sm16 = _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(sm)));

    // Mins: Σ_s min[s] · (Σ q8 over sub-block s of 32), from the 16-value sums.
    const __m256i bsums = load256(x[b].bsums);
    const __m128i sub_sums =
        _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    const __m128i mins = _mm_madd_epi16(_mm256_extracti128_si256(sm16, 1), sub_sums);
    acc_m = _mm_fmadd_ps(_mm_set1_ps(x[b].d * t[w[b].dmin]), _mm_cvtepi32_ps(mins), acc_m);

    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < k_qk_k / k_chunk; ++c) {
      __m256i lo, hi;
      values::get(w[b], c, lo, hi);
      __m256i plo = _mm256_maddubs_epi16(lo, load256(x[b].qs + k_chunk * c));
      __m256i phi = _mm256_maddubs_epi16(hi, load256(x[b].qs + k_chunk * c + 32));
      plo = _mm256_madd_epi16(plo, broadcast_i16(scales, 2 * c));
      phi = _mm256_madd_epi16(phi, broadcast_i16(scales, 2 * c + 1));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x[b].d * t[w[b].d]), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum256(acc) - hsum128(acc_m);
}

// Bit `bit` of each byte of v, moved to bit 4 (the fifth bit of a Q5_K value).
HEARTH_AVX2 inline __m256i bit_to_16(__m256i v, int bit) {
  const __m256i isolated = _mm256_and_si256(v, _mm256_set1_epi8(char(1 << bit)));
  // 16-bit shifts are safe: the isolated bit moves inside its own byte.
  if (bit < 4) return _mm256_slli_epi16(isolated, 4 - bit);
  if (bit > 4) return _mm256_srli_epi16(isolated, bit - 4);
  return isolated;
}

struct q4_k_values {
  HEARTH_AVX2 static void get(const block_q4_k& w, int c, __m256i& lo, __m256i& hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = load256(w.qs + 32 * c);
    lo = _mm256_and_si256(q, m4);
    hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
  }
};

struct q5_k_values {
  HEARTH_AVX2 static void get(const block_q5_k& w, int c, __m256i& lo, __m256i& hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = load256(w.qs + 32 * c);
    const __m256i qh = load256(w.qh);
    lo = _mm256_or_si256(_mm256_and_si256(q, m4), bit_to_16(qh, 2 * c));
    hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), bit_to_16(qh, 2 * c + 1));
  }
};

}  // namespace

HEARTH_AVX2 float dot_q4_k_q8_k_avx2(int64_t n, const void* wv, const void* xv) {
  return dot_k_scale_min_avx2<q4_k_values>(n, static_cast<const block_q4_k*>(wv),
                                           static_cast<const block_q8_k*>(xv));
}

HEARTH_AVX2 float dot_q5_k_q8_k_avx2(int64_t n, const void* wv, const void* xv) {
  return dot_k_scale_min_avx2<q5_k_values>(n, static_cast<const block_q5_k*>(wv),
                                           static_cast<const block_q8_k*>(xv));
}

HEARTH_AVX2 float dot_q6_k_q8_k_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q6_k* w = static_cast<const block_q6_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    // The stored q in [0, 63] go to maddubs unsigned; the 32 of q - 32 is taken off at the end
    // as 32 · Σ_s scale[s] · (Σ q8 over sub-block s).
    const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), load256(x[b].bsums));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(w[b].ql + 64 * h);
      const __m256i ql1 = load256(w[b].ql + 64 * h + 32);
      const __m256i qh = load256(w[b].qh + 32 * h);
      // High 2 bits of value group g sit at bit 2g of qh; move them to bits 4..5.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(ql1, m4),
                          _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                          _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
      };
      for (int g = 0; g < 4; ++g) {
        // Scales of the two sub-blocks of 16 in this group: 8 int16 lanes each.
        const int s = 8 * h + 2 * g;
        const __m128i pick = _mm_set_epi64x(int64_t(0x0101010101010101ull * uint64_t(s + 1)),
                                            int64_t(0x0101010101010101ull * uint64_t(s)));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
        const __m256i p = _mm256_maddubs_epi16(q[g], load256(x[b].qs + 128 * h + 32 * g));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
      }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x[b].d * t[w[b].d]), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum256(acc);
}

HEARTH_AVX2 float dot_q8_k_q8_k_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q8_k* w = static_cast<const block_q8_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    __m256i sumi = _mm256_setzero_si256();
    for (int i = 0; i < k_qk_k; i += 32) {
      const __m256i qw = load256(w[b].qs + i);
      const __m256i qx = load256(x[b].qs + i);
      // |w| · (x with w's sign): unsigned × signed bytes for maddubs.
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, ones));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(w[b].d * x[b].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum256(acc);
}

}  // namespace hearth::cpu
