// out = x · wᵀ (+ bias) on GPUs for few tokens (up to MAX_TOK), every token at once, so each
// weight is read and dequantized once per call: an invocation takes whole 32-value chunks of a row
// (dequant_chunk: a block, or a K-quant sub-block, its scales read once) and dots each with every
// token's activations. ROWS rows per workgroup, the invocations spread over each row's chunks
// (neighbours read neighbouring bytes); all (row, token) sums reduced together, behind one
// barrier. CPU devices (lavapipe) take mul_mat.comp's row-per-lane layout at every token count
// instead (device::lane_layouts).
// Per weight type (WEIGHT_TYPE) and reduction (USE_SUBGROUP).
// MUL_MAT_ID: the expert product (engine/backend.h mul_mat_id) for few tokens: workgroup z is
// output row t, which reads the matrix of expert ids[t] of the stacked weights, and x's row t / k
// (shared_x) or t.
#version 450
#include "common.glsl"

#define ROWS 2
#define MAX_TOK 8

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
#else
  uint dst_cols;   // the output's row length: n_out, more where w is a row part of a weight
  uint dst_first;  // the output column of w's first row (buffer::first_row)
#endif
} p;

#define MIN_APART
#include "dequant.glsl"

#if WEIGHT_TYPE == TYPE_F32 || WEIGHT_TYPE == TYPE_F16 || WEIGHT_TYPE == TYPE_BF16
#define CHUNK_VALUES(c) min(32u, p.n_in - 32u * (c))  // float rows: any length
#else
#define CHUNK_VALUES(c) 32u
#endif

// Adds chunk c of the row at byte `row` dotted with each of n_tok activation rows (from x0, X_COLS
// apart) to acc[base + t].
#define ACCUMULATE_CHUNK(acc, base, row, c)                                    \
  {                                                                            \
    float w[32];                                                               \
    dequant_chunk(row, c, p.n_in, w);                                          \
    uint n_val = CHUNK_VALUES(c);                                              \
    for (uint t = 0u; t < n_tok; ++t) {                                        \
      uint xr = x0 + t * X_COLS + 32u * (c);                                   \
      float s = 0.0;                                                           \
      for (uint j = 0u; j < n_val; ++j) s += w[j] * x[xr + j];                 \
      ACCUMULATE_MIN(s, row, c, t)                                             \
      acc[(base) + t] += s;                                                    \
    }                                                                          \
  }
#ifdef CHUNK_MIN
#define ACCUMULATE_MIN(s, row, c, t) s += chunk_min(row, c) * x[x0 + (t) * X_COLS + p.n_in + (c)];
#else
#define ACCUMULATE_MIN(s, row, c, t)
#endif

shared float partial[ROWS * MAX_TOK][BLOCK];  // [row * MAX_TOK + token][subgroup or invocation]

void main() {
  uint r0 = group_index() * ROWS;
  if (r0 >= p.n_out) return;  // whole workgroup: before any barrier
  uint tid = gl_LocalInvocationID.x;
#if MUL_MAT_ID
  uint z = gl_WorkGroupID.z;
  uint n_tok = 1u;
  uint w0 = uint(ids[z]) * p.expert_bytes;
  uint x0 = (p.shared_x != 0u ? z / p.k : z) * X_COLS;
  uint out0 = z * p.n_out;
  uint dst_cols = p.n_out, dst_first = 0u;
#else
  uint n_tok = p.n_tok;
  uint w0 = 0u, x0 = 0u, out0 = 0u;
  uint dst_cols = p.dst_cols, dst_first = p.dst_first;
#endif
  uint n_chunks = (p.n_in + 31u) / 32u;
  float acc[ROWS * MAX_TOK];
  for (uint i = 0u; i < ROWS * MAX_TOK; ++i) acc[i] = 0.0;
  for (uint i = 0u; i < ROWS; ++i) {
    uint row = w0 + min(r0 + i, p.n_out - 1u) * p.row_bytes;  // past the end: never written
    for (uint c = tid; c < n_chunks; c += BLOCK) ACCUMULATE_CHUNK(acc, i * MAX_TOK, row, c)
  }
  // One barrier for all ROWS * n_tok sums.
#if USE_SUBGROUP
  for (uint i = 0u; i < ROWS; ++i) {
    for (uint t = 0u; t < n_tok; ++t) {
      float s = subgroupAdd(acc[i * MAX_TOK + t]);
      if (subgroupElect()) partial[i * MAX_TOK + t][gl_SubgroupID] = s;
    }
  }
  uint n_part = gl_NumSubgroups;
#else
  for (uint v = 0u; v < ROWS * MAX_TOK; ++v) partial[v][tid] = acc[v];
  uint n_part = BLOCK;
#endif
  barrier();
  for (uint v = tid; v < ROWS * MAX_TOK; v += BLOCK) {
    uint i = v / MAX_TOK, t = v % MAX_TOK;
    uint r = r0 + i;
    if (r >= p.n_out || t >= n_tok) continue;
    float s = 0.0;
    for (uint g = 0u; g < n_part; ++g) s += partial[v][g];
    dst[out0 + t * dst_cols + dst_first + r] = s + (p.has_bias != 0u ? bias[dst_first + r] : 0.0);
  }
}
