// The kernels behind kernels_for(), named here so tests can run the portable and SIMD versions of
// one kernel side by side; everything else uses engine/cpu/vec-dot.h. The portable kernels are
// in vec-dot.cpp (F32, F16, BF16, the 32-value blocks), vec-dot-k.cpp (the K-quants) and
// vec-dot-legacy.cpp (Q4_1, Q5_0, Q5_1, Q8_1); each architecture's SIMD kernels in their own
// files (x86: *-avx2.cpp, *-avx512.cpp; arm64: vec-dot-neon.cpp), compiled only for it.
#pragma once

#include <cstdint>

#include "engine/cpu/vec-dot.h"
#include "engine/io/tensor-type.h"

namespace hearth::cpu {

// Every type's kernels as kernels_for() hands them out: vec-dot.cpp fills in the portable ones,
// then lets the architecture's file put in those this CPU has faster versions of.
struct kernel_table {
  type_kernels f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q8_k;
  type_kernels q4_1, q5_0, q5_1, q8_1;  // vec-dot-legacy.cpp
};

// Weight row (n values) · activation row in the weight type's vec_dot_type, as kernels_for().
// Q4_0 dots with Q8_0 activations; Q4_K, Q5_K, Q6_K and Q8_K with Q8_K activations.
float dot_q4_0_q8_0_generic(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q5_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_generic(int64_t n, const void* w, const void* x);
float dot_q8_k_q8_k_generic(int64_t n, const void* w, const void* x);

// The Q8_K activations, as ggml's quantize_row_q8_K_ref (dequantization is the type's:
// engine/io/type-traits.h).
void q8_k_from_float(const float* x, void* y, int64_t n);

// The 32-value fallback formats (vec-dot-legacy.cpp), as ggml's CPU backend pairs them: Q5_0
// with Q8_0 activations, Q4_1 and Q5_1 with Q8_1 (which carries s = d * Σq for their minimum).
float dot_q4_1_q8_1_generic(int64_t n, const void* w, const void* x);
float dot_q5_0_q8_0_generic(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1_generic(int64_t n, const void* w, const void* x);
float dot_q8_1_q8_1_generic(int64_t n, const void* w, const void* x);
// As quantize_row_q8_1_ref.
void q8_1_from_float_generic(const float* x, void* y, int64_t n);

#if defined(__x86_64__)
// Puts in the AVX2 kernels when cpu_has_avx2() and the AVX-512 VNNI ones when
// cpu_has_avx512_vnni() (vec-dot-avx2.cpp).
void use_x86_kernels(kernel_table& t);
// AVX2 (vec-dot-avx2.cpp, vec-dot-k-avx2.cpp, vec-dot-legacy-avx2.cpp).
float dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q8_k_q8_k_avx2(int64_t n, const void* w, const void* x);
float dot_q4_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float dot_q5_0_q8_0_avx2(int64_t n, const void* w, const void* x);
float dot_q5_1_q8_1_avx2(int64_t n, const void* w, const void* x);
float dot_q8_1_q8_1_avx2(int64_t n, const void* w, const void* x);
void q8_1_from_float_avx2(const float* x, void* y, int64_t n);  // the same bytes as portable
// AVX-512 VNNI (gemm-k-avx512.cpp).
// quantize_row_q8_K_ref bit for bit, on 16 lanes (the K-quant tile kernels' activations).
void quantize_q8_k_avx512(const float* x, block_q8_k* y, int64_t n);
#elif defined(__aarch64__)
// Puts in the NEON kernels (ASIMD, every arm64 CPU) unless HEARTH_CPU_PORTABLE=1, their 8-bit
// dot products with SDOT where cpu_has_neon_dotprod() (vec-dot-neon.cpp).
void use_neon_kernels(kernel_table& t);
// Plain NEON (widening multiplies) and _dotprod (SDOT: four bytes per lane per instruction).
float dot_f16_neon(int64_t n, const void* w, const void* x);
float dot_q8_0_neon(int64_t n, const void* w, const void* x);
float dot_q8_0_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q4_0_q8_0_neon(int64_t n, const void* w, const void* x);
float dot_q4_0_q8_0_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_neon(int64_t n, const void* w, const void* x);
float dot_q4_k_q8_k_neon_dotprod(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_neon(int64_t n, const void* w, const void* x);
float dot_q6_k_q8_k_neon_dotprod(int64_t n, const void* w, const void* x);
#endif

}  // namespace hearth::cpu
