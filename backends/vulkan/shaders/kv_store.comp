// cache[cells[i], :] = src[i, :], converted to the cache type (CACHE_F16: F16 pairs packed in
// uints, rounded to nearest even as the CPU does; else F32). One workgroup per token.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) readonly buffer Cells { int cells[]; };
layout(std430, binding = 2) writeonly buffer Cache { uint cache[]; };
layout(push_constant) uniform Params {
  uint cols;
  uint n_tok;
} p;

void main() {
  uint t = group_index();
  if (t >= p.n_tok) return;
  uint cell = uint(cells[t]);
#if CACHE_F16
  uint half_cols = p.cols / 2u;  // cols is even (checked on the host)
  for (uint j = gl_LocalInvocationID.x; j < half_cols; j += BLOCK) {
    uint lo = f32_to_f16_bits(src[t * p.cols + 2u * j]);
    uint hi = f32_to_f16_bits(src[t * p.cols + 2u * j + 1u]);
    cache[cell * half_cols + j] = lo | (hi << 16);
  }
#else
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += BLOCK)
    cache[cell * p.cols + j] = floatBitsToUint(src[t * p.cols + j]);
#endif
}
