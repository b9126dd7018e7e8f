// out = x · wᵀ (+ bias) for few tokens: one workgroup per (weight row, token), the dot product
// reduced over the workgroup. Per weight type (WEIGHT_TYPE) and reduction (USE_SUBGROUP).
// MUL_MAT_ID: the expert product (engine/backend.h mul_mat_id) for few tokens: output row t reads
// the matrix of expert ids[t] of the stacked weights, and x's row t / k (shared_x) or t.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };    // F32 [n_tok, X_COLS]
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Dst { float dst[]; };  // F32 [n_tok, n_out]
#if MUL_MAT_ID
layout(std430, binding = 4) readonly buffer Ids { int ids[]; };  // I32 [n_tok / k, k]
#endif
layout(push_constant) uniform Params {
  uint n_in;
  uint n_out;
  uint n_tok;  // MUL_MAT_ID: output rows, n_tok * k
  uint row_bytes;
  uint has_bias;
#if MUL_MAT_ID
  uint k;
  uint shared_x;      // x has one row per token, not one per output row
  uint expert_bytes;  // n_out * row_bytes
#endif
} p;

#define MIN_APART
#include "dequant.glsl"

void main() {
  uint r = group_index();
  uint t = gl_WorkGroupID.z;
  if (r >= p.n_out) return;  // whole workgroup: before any barrier
#if MUL_MAT_ID
  uint row = uint(ids[t]) * p.expert_bytes + r * p.row_bytes;
  uint xr = (p.shared_x != 0u ? t / p.k : t) * X_COLS;
#else
  uint row = r * p.row_bytes;
  uint xr = t * X_COLS;
#endif
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < X_COLS; j += BLOCK) s += dequant(row, j) * x[xr + j];
  s = block_sum(s);
  if (gl_LocalInvocationID.x == 0) dst[t * p.n_out + r] = s + (p.has_bias != 0 ? bias[r] : 0.0);
}
