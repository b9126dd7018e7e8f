// out = x · wᵀ (+ bias) for few tokens: one workgroup per (weight row, token), the dot product
// reduced over the workgroup. Per weight type (WEIGHT_TYPE) and reduction (USE_SUBGROUP).
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };    // F32 [n_tok, n_in]
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Dst { float dst[]; };  // F32 [n_tok, n_out]
layout(push_constant) uniform Params {
  uint n_in;
  uint n_out;
  uint n_tok;
  uint row_bytes;
  uint has_bias;
} p;

#include "dequant.glsl"

void main() {
  uint r = group_index();
  uint t = gl_WorkGroupID.z;
  if (r >= p.n_out) return;  // whole workgroup: before any barrier
  uint row = r * p.row_bytes;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.n_in; j += BLOCK) s += dequant(row, j) * x[t * p.n_in + j];
  s = block_sum(s);
  if (gl_LocalInvocationID.x == 0) dst[t * p.n_out + r] = s + (p.has_bias != 0 ? bias[r] : 0.0);
}
