// What the AVX-512 kernel files share: the target attribute their functions carry (they are
// called only when cpu_has_avx512_vnni()), and a lane sum. Include it only from those files: it
// turns off gcc 12's uninitialised-value warnings for the rest of the file, because its AVX-512
// intrinsics pass an uninitialised placeholder operand (_mm512_undefined_*) and warn about it
// inside the system header; nothing of ours is uninitialised.
#pragma once

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

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

// The 4 bytes at p in every 32-bit lane (a load with broadcast: vpbroadcastd from memory).
HEARTH_AVX512 inline __m512i broadcast_i32(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

}  // namespace hearth::cpu
