// out = x · wᵀ (+ bias) for many tokens: 32 weight rows × 32 tokens per workgroup, the inner
// dimension in steps of 16 through shared memory, 2 × 2 outputs per invocation.
// Per weight type (WEIGHT_TYPE).
// MUL_MAT_ID: the expert product (engine/backend.h mul_mat_id) for many tokens, its rows grouped
// by expert (moe_group.comp): workgroup z is an expert, y a tile of 32 of that expert's rows, so
// an expert's weight tile is read once per 32 of its rows and experts no row chose are never read
// (their workgroups, like tiles past an expert's count, do nothing).
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
#if MUL_MAT_ID
layout(std430, binding = 4) readonly buffer Groups { uint groups[]; };  // moe_group.comp's layout
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
  uint n_expert;
#endif
} p;

#define MIN_APART
#include "dequant.glsl"

shared float ws[TK][TM + 1];
shared float xs[TK][TN + 1];

void main() {
  uint r0 = gl_WorkGroupID.x * TM;
  uint tid = gl_LocalInvocationID.x;
#if MUL_MAT_ID
  uint e = gl_WorkGroupID.z;
  uint count = groups[e];
  uint w0 = e * p.expert_bytes;
  uint list = p.n_expert + e * p.n_tok;  // this expert's output rows
#else
  uint count = p.n_tok;
  uint w0 = 0u;
#endif
  uint tr = tid % 16u;
  uint tt = tid / 16u;
  // Tiles of rows y, y + gy, ...: the host sizes gy for the usual most rows of one expert (each
  // token's k ids distinct); an expert with more (repeated ids) still gets all its rows. The bound
  // is the same for the whole workgroup, so the barriers inside stay uniform.
  for (uint t0 = gl_WorkGroupID.y * TN; t0 < count; t0 += gl_NumWorkGroups.y * TN) {
    float acc00 = 0.0, acc01 = 0.0, acc10 = 0.0, acc11 = 0.0;
    for (uint k0 = 0; k0 < X_COLS; k0 += TK) {
      for (uint l = tid; l < TM * TK; l += BLOCK) {
        uint m = l / TK, k = l % TK;
        uint r = r0 + m, kk = k0 + k;
        ws[k][m] = (r < p.n_out && kk < X_COLS) ? dequant(w0 + r * p.row_bytes, kk) : 0.0;
        uint t = t0 + m;
#if MUL_MAT_ID
        uint xt = 0u;
        if (t < count) xt = p.shared_x != 0u ? groups[list + t] / p.k : groups[list + t];
#else
        uint xt = t;
#endif
        xs[k][m] = (t < count && kk < X_COLS) ? x[xt * X_COLS + kk] : 0.0;
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
#if MUL_MAT_ID
        if (r < p.n_out && t < count) dst[groups[list + t] * p.n_out + r] = acc[i * 2u + j];
#else
        if (r < p.n_out && t < count)
          dst[t * p.n_out + r] = acc[i * 2u + j] + (p.has_bias != 0 ? bias[r] : 0.0);
#endif
      }
    }
  }
}
