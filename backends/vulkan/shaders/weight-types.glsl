// The weight types' ids (ggml's), which the build passes as WEIGHT_TYPE (backends/vulkan/CMakeLists.txt).
// Included by dequant.glsl, and by shaders that choose their layout by type before including it.
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
#endif
