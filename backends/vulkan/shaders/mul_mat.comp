// out = x · wᵀ (+ bias) for many tokens. Weights are read a chunk at a time (dequant_chunk: 32
// values, a block or a K-quant sub-block, its scales read once, its quants a uint at a time) and
// each chunk is dotted with a tile of tokens, so a weight is read and dequantized once per tile.
// Two layouts (ROW_PER_LANE):
// - 0 (GPUs): 32 weight rows × 32 tokens per workgroup; per step of one chunk, 32 invocations
//   dequantize a chunk of each row into shared memory and all load the tile of activations beside
//   it, then each invocation sums 2 × 2 outputs.
// - 1 (CPU devices such as lavapipe, which run a subgroup as one SIMD vector; every token count,
//   one token too): LANE_ROWS rows per invocation (64 rows per workgroup), TN_LANES tokens per
//   workgroup y, each output a chain over the row's chunks in order; an invocation keeps its
//   rows' dequantized chunks in registers and dots them with each token's activations. lavapipe
//   runs a buffer load lane by lane even where its address is uniform, so lanes 0-7 load a
//   chunk's activations together (a vec4 each: 32 values in one load; 8 floats for Q5_1 rows and
//   for F32/F16/BF16 rows of any length, whose variants without WHOLE_CHUNKS read their weights a
//   value at a time too) and subgroupBroadcast hands each value to every lane, where it meets each of
//   the invocation's rows; the terms are summed in the order of a plain loop over the chunk, so
//   the results are unchanged. Q6_K rows read half a super-block (4 chunks) at a time
//   (dequant.glsl q6k_load_half), in 16-byte words.
// Per weight type (WEIGHT_TYPE).
// MUL_MAT_ID: the expert product (engine/backend.h mul_mat_id) for many tokens, its rows grouped
// by expert (moe_group.comp): workgroup z is an expert, y a tile of that expert's rows, so an
// expert's weight tile is read once per tile of its rows and experts no row chose are never read
// (their workgroups, like tiles past an expert's count, do nothing).
#version 450
#include "weight-types.glsl"
#if ROW_PER_LANE
// Quantized rows other than Q5_1's (whose rows of activations carry sums) come in 32-value
// chunks at multiples of 32 values: values 4i..4i+3 of a chunk from lane i's vec4.
// So do float rows of whole chunks (WHOLE_CHUNKS: the row length a multiple of 32).
#if (WEIGHT_TYPE != TYPE_F32 && WEIGHT_TYPE != TYPE_F16 && WEIGHT_TYPE != TYPE_BF16 && \
     WEIGHT_TYPE != TYPE_Q5_1) || WHOLE_CHUNKS
#define X_VEC4 1
#endif
// Rows per invocation, 64 rows per workgroup (the host's grid). Each broadcast activation meets
// LANE_ROWS rows, and on lavapipe a broadcast or a load costs far more than a multiply-add (a
// loop over the lanes each), so more rows per invocation amortize them: Q4_K 2048 × 5632 at 32
// tokens took 155 ms with 1 row, 45 with 4, 31 with 8. Rows that read their activations one at a
// time with a guard per value (Q5_1, floats of any length) slow down past 4 (F16: 55 ms at 4, 90
// at 8).
#if X_VEC4
#define LANE_ROWS 8
#else
#define LANE_ROWS 4
#endif
#define BLOCK (64 / LANE_ROWS)
#else
#define BLOCK 256
#endif
#include "common.glsl"
#if ROW_PER_LANE
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_ballot : enable
#endif

#define TM 32
#define TN 32
#define TN_LANES 32  // tokens per workgroup of the ROW_PER_LANE layout

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };  // F32 [n_tok, X_COLS]
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Dst { float dst[]; };  // F32 [n_tok, n_out]
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
#else
  uint dst_cols;   // the output's row length: n_out, more where w is a row part of a weight
  uint dst_first;  // the output column of w's first row (buffer::first_row)
#endif
} p;

#define MIN_APART
#include "dequant.glsl"

#if (WEIGHT_TYPE == TYPE_F32 || WEIGHT_TYPE == TYPE_F16 || WEIGHT_TYPE == TYPE_BF16) && \
    !WHOLE_CHUNKS
#define CHUNK_VALUES(c) min(32u, p.n_in - 32u * (c))  // float rows: any length
#else
#define CHUNK_VALUES(c) 32u
#endif

#if MUL_MAT_ID
// Row t of this expert's list: its row of x and of the output.
#define X_ROW(t) (p.shared_x != 0u ? groups[list + (t)] / p.k : groups[list + (t)])
#define DST_ROW(t) groups[list + (t)]
#else
#define X_ROW(t) (t)
#define DST_ROW(t) (t)
#endif
#if MUL_MAT_ID
#define DST_COLS p.n_out
#define DST_FIRST 0u
#else
#define DST_COLS p.dst_cols
#define DST_FIRST p.dst_first
#endif

#if ROW_PER_LANE
#if X_VEC4
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
// Values 4i..4i+3 of the chunk, from lane i's vec4 (one broadcast for the four), met by each of
// the invocation's rows in the order of a plain loop over the chunk.
#define TERM4(i)                                      \
  {                                                   \
    vec4 b = subgroupBroadcast(xl, i);                \
    for (uint j = 0u; j < LANE_ROWS; ++j) {           \
      s[j] += w[j][4u * i] * b.x;                     \
      s[j] += w[j][4u * i + 1u] * b.y;                \
      s[j] += w[j][4u * i + 2u] * b.z;                \
      s[j] += w[j][4u * i + 3u] * b.w;                \
    }                                                 \
  }
#else
// Value q + i of the chunk, from lane i of each group of eight.
#define TERM(i)                                                            \
  {                                                                        \
    float b = subgroupBroadcast(xl, i);                                    \
    if (q + i < n_val)                                                     \
      for (uint j = 0u; j < LANE_ROWS; ++j) s[j] += w[j][q + i] * b;       \
  }
#endif

void main() {
  uint lane8 = gl_SubgroupInvocationID % 8u;
  uint r0 = gl_WorkGroupID.x * (BLOCK * LANE_ROWS) + gl_LocalInvocationID.x;  // rows r0 + BLOCK j
#if MUL_MAT_ID
  uint e = gl_WorkGroupID.z;
  uint count = groups[e];
  uint w0 = e * p.expert_bytes;
  uint list = p.n_expert + e * p.n_tok;  // this expert's output rows
#else
  uint count = p.n_tok;
  uint w0 = 0u;
#endif
  uint rows[LANE_ROWS];
  for (uint j = 0u; j < LANE_ROWS; ++j)
    rows[j] = w0 + min(r0 + BLOCK * j, p.n_out - 1u) * p.row_bytes;  // past the end: never written
  uint n_chunks = (p.n_in + 31u) / 32u;
  for (uint t0 = gl_WorkGroupID.y * TN_LANES; t0 < count; t0 += gl_NumWorkGroups.y * TN_LANES) {
    uint n_t = min(TN_LANES, count - t0);
    float acc[LANE_ROWS * TN_LANES];
    for (uint t = 0u; t < LANE_ROWS * TN_LANES; ++t) acc[t] = 0.0;
#if WEIGHT_TYPE == TYPE_Q6_K
    q6k_half half_blocks[LANE_ROWS];  // each row's current half super-block (q6k_load_half)
#endif
    for (uint c = 0u; c < n_chunks; ++c) {
      float w[LANE_ROWS][32];
#if WEIGHT_TYPE == TYPE_Q6_K
      if (c % 4u == 0u)
        [[unroll]] for (uint j = 0u; j < LANE_ROWS; ++j) q6k_load_half(rows[j], c, half_blocks[j]);
      [[unroll]] for (uint j = 0u; j < LANE_ROWS; ++j) q6k_chunk(half_blocks[j], c % 4u, w[j]);
#else
      for (uint j = 0u; j < LANE_ROWS; ++j) dequant_chunk(rows[j], c, p.n_in, w[j]);
#endif
      uint n_val = CHUNK_VALUES(c);
#ifdef CHUNK_MIN
      float m[LANE_ROWS];
      for (uint j = 0u; j < LANE_ROWS; ++j) m[j] = chunk_min(rows[j], c);
#endif
      for (uint t = 0u; t < n_t; ++t) {
        uint xrow = X_ROW(t0 + t) * X_COLS;
        uint xr = xrow + 32u * c;
        float s[LANE_ROWS];
        for (uint j = 0u; j < LANE_ROWS; ++j) s[j] = 0.0;
#if X_VEC4
        // The chunk's 32 activations in one load, four per lane, each lane's four then broadcast
        // to every lane at once and met by each of the invocation's rows.
        vec4 xl = x4[(xr >> 2) + lane8];
        TERM4(0u) TERM4(1u) TERM4(2u) TERM4(3u) TERM4(4u) TERM4(5u) TERM4(6u) TERM4(7u)
#else
        // Eight of the chunk's activations a load, one per lane, each then broadcast to every
        // lane: an eighth as many loads as values (lavapipe runs a buffer load lane by lane).
        for (uint q = 0u; q < 32u; q += 8u) {
          uint k = q + lane8;
          float xl = k < n_val ? x[xr + k] : 0.0;
          TERM(0u) TERM(1u) TERM(2u) TERM(3u) TERM(4u) TERM(5u) TERM(6u) TERM(7u)
        }
#endif
        for (uint j = 0u; j < LANE_ROWS; ++j) {
#ifdef CHUNK_MIN
          s[j] += m[j] * x[xrow + p.n_in + c];
#endif
          acc[j * TN_LANES + t] += s[j];
        }
      }
    }
    for (uint j = 0u; j < LANE_ROWS; ++j) {
      uint r = r0 + BLOCK * j;
      if (r < p.n_out) {
        float b = p.has_bias != 0u ? bias[DST_FIRST + r] : 0.0;
        for (uint t = 0u; t < n_t; ++t)
          dst[DST_ROW(t0 + t) * DST_COLS + DST_FIRST + r] = acc[j * TN_LANES + t] + b;
      }
    }
  }
}
#else
#ifdef CHUNK_MIN
#define TK 33  // a chunk and its minimum, met by column n_in + c
#else
#define TK 32
#endif
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
  uint n_chunks = (p.n_in + 31u) / 32u;
  uint tr = tid % 16u;
  uint tt = tid / 16u;
  // Tiles of rows y, y + gy, ...: the host sizes gy for the usual most rows of one expert (each
  // token's k ids distinct); an expert with more (repeated ids) still gets all its rows. The bound
  // is the same for the whole workgroup, so the barriers inside stay uniform.
  for (uint t0 = gl_WorkGroupID.y * TN; t0 < count; t0 += gl_NumWorkGroups.y * TN) {
    float acc00 = 0.0, acc01 = 0.0, acc10 = 0.0, acc11 = 0.0;
    for (uint c = 0u; c < n_chunks; ++c) {
      if (tid < TM) {
        uint row = w0 + min(r0 + tid, p.n_out - 1u) * p.row_bytes;  // past the end: never written
        float w[32];
        dequant_chunk(row, c, p.n_in, w);
        for (uint k = 0u; k < 32u; ++k) ws[k][tid] = w[k];
#ifdef CHUNK_MIN
        ws[32][tid] = chunk_min(row, c);
#endif
      }
      for (uint l = tid; l < TN * TK; l += BLOCK) {
        uint m = l / TK, k = l % TK;
        uint t = t0 + m;
#ifdef CHUNK_MIN
        uint col = k < 32u ? 32u * c + k : p.n_in + c;
#else
        uint col = 32u * c + k;
#endif
        xs[k][m] = (t < count && col < X_COLS) ? x[X_ROW(t) * X_COLS + col] : 0.0;
      }
      barrier();
      for (uint k = 0u; k < TK; ++k) {
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
    for (uint i = 0u; i < 2u; ++i) {
      for (uint j = 0u; j < 2u; ++j) {
        uint r = r0 + tr + 16u * i, t = t0 + tt + 16u * j;
#if MUL_MAT_ID
        if (r < p.n_out && t < count) dst[DST_ROW(t) * p.n_out + r] = acc[i * 2u + j];
#else
        if (r < p.n_out && t < count)
          dst[t * DST_COLS + DST_FIRST + r] =
              acc[i * 2u + j] + (p.has_bias != 0u ? bias[DST_FIRST + r] : 0.0);
#endif
      }
    }
  }
}
#endif
