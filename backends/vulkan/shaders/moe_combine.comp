// out[t, :] = Σ_j weights[t, j] * x[t*k + j, :], the products added in order j = 0 .. k-1 as the
// reference does; one invocation per output value.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };              // F32 [n_tok*k, cols]
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };  // F32 [n_tok, k]
layout(std430, binding = 2) writeonly buffer Dst { float dst[]; };         // F32 [n_tok, cols]
layout(push_constant) uniform Params {
  uint cols;
  uint n_tok;
  uint k;
} p;

void main() {
  uint i = group_index() * BLOCK + gl_LocalInvocationID.x;
  if (i >= p.n_tok * p.cols) return;
  uint t = i / p.cols;
  uint src = t * p.k * p.cols + i % p.cols;
  // precise: a multiply and an add each rounded, as the reference's (no fused multiply-add).
  precise float o = x[src] * weights[t * p.k];
  for (uint j = 1u; j < p.k; ++j) o += x[src + j * p.cols] * weights[t * p.k + j];
  dst[i] = o;
}
