// The K-quants' AVX2 dot products (x86 only; chosen at run time when cpu_has_avx2()): the same
// integer sums as the portable kernels in vec-dot-k.cpp, one super-block at a time.
#include "engine/cpu/avx2.h"
#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {

// maddubs multiplies unsigned weight values (at most 63) by signed activation bytes (|q8| <= 127)
// and adds pairs into int16 without saturating (2·63·127 < 32767); madd then applies the
// sub-block scale and widens to int32.

namespace {

constexpr int k_chunk = 64;  // Q4_K/Q5_K: 64 values share 32 bytes of nibbles

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
