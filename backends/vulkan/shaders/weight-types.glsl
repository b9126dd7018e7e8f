// The weight types' ids (ggml's), which the build passes as WEIGHT_TYPE (backends/vulkan/CMakeLists.txt),
// and their block layouts as dequant.glsl reads them. Included by dequant.glsl, and by shaders that
// choose their layout by type before including it; and by backends/vulkan/block-layouts.cpp,
// which checks every value here against engine/io/tensor-type.h (the ids, and the sizes and field
// offsets of its block structs) when the backend is compiled: plain #defines, valid GLSL and C++.
#ifndef WEIGHT_TYPES_GLSL
#define WEIGHT_TYPES_GLSL
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_BF16 30
#define TYPE_Q8_0 8
#define TYPE_Q4_0 2
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14

// Bytes per block, and the byte offsets of the fields after the F16 scale d (at 0, except Q6_K's).
#define Q8_0_BYTES 34u
#define Q8_0_QS 2u
#define Q4_0_BYTES 18u
#define Q4_0_QS 2u
#define Q5_0_BYTES 22u
#define Q5_0_QH 2u
#define Q5_1_BYTES 24u
#define Q5_1_M 2u
#define Q5_1_QH 4u
// Q5_0/Q5_1: the 16 nibble bytes qs follow the 4 bytes of fifth bits qh.
#define Q5_QS_AFTER_QH 4u
// Q4_K/Q5_K: d, dmin and the 12 scale bytes are the block's first 16-byte word.
#define Q4_K_BYTES 144u
#define Q4_K_QS 16u
#define Q5_K_BYTES 176u
#define Q5_K_QH 16u
#define Q5_K_QS 48u
#define Q6_K_BYTES 210u
#define Q6_K_QL 0u
#define Q6_K_QH 128u
#define Q6_K_SCALES 192u
#define Q6_K_D 208u
#endif
