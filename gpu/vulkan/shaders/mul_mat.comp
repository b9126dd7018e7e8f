// out = x · wᵀ (+ bias) for many tokens: 32 weight rows × 32 tokens per workgroup, the inner
// dimension in steps of 16 through shared memory, 2 × 2 outputs per invocation.
// Per weight type (WEIGHT_TYPE).
#version 450
#define BLOCK 256
#include "common.glsl"

#define TM 32
#define TN 32
#define TK 16

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n_in;
  uint n_out;
  uint n_tok;
  uint row_bytes;
  uint has_bias;
} p;

#include "dequant.glsl"

shared float ws[TK][TM + 1];
shared float xs[TK][TN + 1];

void main() {
  uint r0 = gl_WorkGroupID.x * TM;
  uint t0 = gl_WorkGroupID.y * TN;
  uint tid = gl_LocalInvocationID.x;
  uint tr = tid % 16u;
  uint tt = tid / 16u;
  float acc00 = 0.0, acc01 = 0.0, acc10 = 0.0, acc11 = 0.0;
  for (uint k0 = 0; k0 < p.n_in; k0 += TK) {
    for (uint e = tid; e < TM * TK; e += BLOCK) {
      uint m = e / TK, k = e % TK;
      uint r = r0 + m, kk = k0 + k;
      ws[k][m] = (r < p.n_out && kk < p.n_in) ? dequant(r * p.row_bytes, kk) : 0.0;
      uint t = t0 + m;
      xs[k][m] = (t < p.n_tok && kk < p.n_in) ? x[t * p.n_in + kk] : 0.0;
    }
    barrier();
    for (uint k = 0; k < TK; ++k) {
      float a0 = ws[k][tr], a1 = ws[k][tr + 16u];
      float b0 = xs[k][tt], b1 = xs[k][tt + 16u];
      acc00 += a0 * b0;
      acc01 += a0 * b1;
      acc10 += a1 * b0;
      acc11 += a1 * b1;
    }
    barrier();
  }
  float acc[4] = float[4](acc00, acc01, acc10, acc11);
  for (uint i = 0; i < 2u; ++i) {
    for (uint j = 0; j < 2u; ++j) {
      uint r = r0 + tr + 16u * i, t = t0 + tt + 16u * j;
      if (r < p.n_out && t < p.n_tok)
        dst[t * p.n_out + r] = acc[i * 2u + j] + (p.has_bias != 0 ? bias[r] : 0.0);
    }
  }
}
