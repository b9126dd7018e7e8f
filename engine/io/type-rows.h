// The row conversions behind tensor_type_traits_of(), named here so that the table
// (type-traits.cpp) and tests can reach each one; everything else uses engine/io/type-traits.h.
// Rows hold n values, a multiple of the type's block size.
#pragma once

#include <cstdint>

namespace hearth {

// The float types, both ways (type-traits.cpp).
void f32_to_float(const void* x, float* y, int64_t n);
void f32_from_float(const float* x, void* y, int64_t n);
void f16_to_float(const void* x, float* y, int64_t n);
void f16_from_float(const float* x, void* y, int64_t n);
void bf16_to_float(const void* x, float* y, int64_t n);
void bf16_from_float(const float* x, void* y, int64_t n);

// Block types -> F32, as ggml's dequantize_row_* (dequantize.cpp).
void q4_0_to_float(const void* x, float* y, int64_t n);
void q4_1_to_float(const void* x, float* y, int64_t n);
void q5_0_to_float(const void* x, float* y, int64_t n);
void q5_1_to_float(const void* x, float* y, int64_t n);
void q8_0_to_float(const void* x, float* y, int64_t n);
void q8_1_to_float(const void* x, float* y, int64_t n);
void q4_k_to_float(const void* x, float* y, int64_t n);
void q5_k_to_float(const void* x, float* y, int64_t n);
void q6_k_to_float(const void* x, float* y, int64_t n);
void q8_k_to_float(const void* x, float* y, int64_t n);

// F32 -> the block types the quantizer writes, as ggml's quantize_row_*_ref
// (quantize-row.cpp).
void q4_0_from_float(const float* x, void* y, int64_t n);
void q4_1_from_float(const float* x, void* y, int64_t n);
void q5_0_from_float(const float* x, void* y, int64_t n);
void q5_1_from_float(const float* x, void* y, int64_t n);
void q8_0_from_float(const float* x, void* y, int64_t n);
void q4_k_from_float(const float* x, void* y, int64_t n);
void q5_k_from_float(const float* x, void* y, int64_t n);
void q6_k_from_float(const float* x, void* y, int64_t n);

}  // namespace hearth
