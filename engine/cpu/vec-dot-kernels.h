// The kernels behind kernels_for(), shared by vec-dot.cpp (F32, F16, BF16, the 32-value blocks)
// and vec-dot-k.cpp (the K-quants), and named here so tests can run the portable and AVX2
// versions of one kernel side by side. Everything else uses engine/cpu/vec-dot.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/io/tensor-type.h"

namespace hearth::cpu {

// Target of the AVX2 kernels; they are only called when cpu_has_avx2().
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

// Weight row (n values) · activation row in the weight type's vec_dot_type, as kernels_for().
// Q4_0 dots with Q8_0 activations; Q4_K, Q5_K, Q6_K and Q8_K with Q8_K activations.
float dot_q4_0_q8_0_generic(int64_t n, const void* w, const void* x);
float dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q5_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q8_k_q8_k_generic(int64_t n, const void* w, const void* x);
// AVX-512 VNNI versions (engine/cpu/gemm-k-avx512.cpp), used when cpu_has_avx512_vnni().
float dot_f16_avx512(int64_t n, const void* w, const void* x);  // gemm-float-avx512.cpp
float dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float dot_q5_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* x);
float dot_q8_k_q8_k_avx2(int64_t n, const void* w, const void* x);

// The Q8_K activations, as ggml's quantize_row_q8_K_ref (dequantization is the type's:
// engine/io/type-traits.h).
void q8_k_from_float(const float* x, void* y, int64_t n);

// The 32-value fallback formats (vec-dot-legacy.cpp), as ggml's CPU backend pairs them: Q5_0
// with Q8_0 activations, Q4_1 and Q5_1 with Q8_1 (which carries s = d * Σq for their minimum).
float dot_q4_1_q8_1_generic(int64_t n, const void* w, const void* x);
float dot_q4_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float dot_q5_0_q8_0_generic(int64_t n, const void* w, const void* x);
float dot_q5_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1_generic(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float dot_q8_1_q8_1_generic(int64_t n, const void* w, const void* x);
float dot_q8_1_q8_1_avx2(int64_t n, const void* w, const void* x);
// As quantize_row_q8_1_ref; the AVX2 version writes the same bytes.
void q8_1_from_float_generic(const float* x, void* y, int64_t n);
void q8_1_from_float_avx2(const float* x, void* y, int64_t n);

}  // namespace hearth::cpu
