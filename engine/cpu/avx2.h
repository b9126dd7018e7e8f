// What the AVX2 kernel files share (x86 only): the target attribute their functions carry (they
// are called only when cpu_has_avx2()), a lane sum, and F16C's conversion of one value.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hearth::cpu {

#define HEARTH_AVX2 __attribute__((target("avx2,fma,f16c")))

HEARTH_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// F16 -> F32 in the AVX2 kernels: F16C converts in a register, where the 256 KiB table would
// compete with the weights for cache.
HEARTH_AVX2 inline float fp16_to_fp32_f16c(uint16_t h) {
  return _cvtsh_ss(h);
}

}  // namespace hearth::cpu
