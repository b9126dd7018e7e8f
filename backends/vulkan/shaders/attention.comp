// Causal attention over the KV cache. The mask is derived from cell_seq/cell_pos/tok_seq/tok_pos
// as the CPU does (engine/cpu/attention.cpp). KV_F16: both caches F16 (q is rounded to F16 first,
// and the softmax weights before the V product, as the CPU does), else F32. Two layouts (LANES):
// - 0 (GPUs): one workgroup per (head, token). Pass 1 computes the scores of cells tid,
//   tid + BLOCK, ... and finds the softmax max and sum (online, per invocation, then reduced);
//   pass 2 takes the cells in chunks of BLOCK: invocation tid turns cell c0 + tid's score, which
//   it computed in pass 1 and kept (the first KEPT_SCORES of each invocation; beyond, computed
//   again), into its weight, then each invocation accumulates its output dimensions over the
//   chunk. USE_SUBGROUP.
// - 1 (CPU devices such as lavapipe, which run a subgroup as one SIMD vector): one invocation per
//   (token, head), HEAD_DIM values each, its q and its output in registers. It finds the range of
//   cells its token sees, then takes them in order twice: scores (a chain over the dimensions)
//   with the softmax's running max and sum, then the weights and the V product, a chain over the
//   cells. A cache row's 8 values come in one 16-byte load: lavapipe runs every buffer load as a
//   loop over the lanes, and the GPU layout spends a load per value and a shared one per product
//   (32 tokens over 512 cells: 245 ms in the GPU layout on lavapipe, 28 in this one). Each
//   (token, head) is summed in one order whatever shares the call, so the results do not depend
//   on the batch.
#version 450
#if LANES
#define BLOCK 8  // one lavapipe subgroup: a decoding token's 32 heads still spread over 4 groups
#endif
#include "common.glsl"

#define MAX_HEAD_DIM 256
#define KEPT_SCORES 32  // per invocation: BLOCK * KEPT_SCORES cells computed once

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) readonly buffer TokSeq { int tok_seq[]; };
layout(std430, binding = 4) readonly buffer TokPos { int tok_pos[]; };
layout(std430, binding = 5) readonly buffer CellSeq { int cell_seq[]; };
layout(std430, binding = 6) readonly buffer CellPos { int cell_pos[]; };
layout(std430, binding = 7) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n_head;
  uint n_head_kv;
  uint head_dim_k;
  uint head_dim_v;
  uint k_row;  // values per cache row
  uint v_row;
  uint q_row;
  uint out_row;
  uint n_cells;
  int window;
  float scale;
  float softcap;
  uint n_tok;
} p;

#if LANES
// The loops over a head's values are unrolled ([[unroll]]), so q and the output are indexed by
// constants and can stay in registers (without it, 50-57 ms against 28 for 32 tokens over 512 cells).
#extension GL_EXT_control_flow_attributes : enable
// A cache row's values 8 at a time, from one 16-byte word (F16) or two (F32): rows start at
// multiples of 8 values (HEAD_DIM and the row lengths are), and each cache is a buffer of its own.
#if KV_F16
layout(std430, binding = 1) readonly buffer KCache4 { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer VCache4 { uvec4 vc4[]; };
#define LOAD8(buf4, off, r)                  \
  {                                          \
    uvec4 u = buf4[(off) >> 3];              \
    vec2 a = unpackHalf2x16(u.x);            \
    vec2 b = unpackHalf2x16(u.y);            \
    vec2 c = unpackHalf2x16(u.z);            \
    vec2 d = unpackHalf2x16(u.w);            \
    r[0] = a.x; r[1] = a.y; r[2] = b.x; r[3] = b.y; \
    r[4] = c.x; r[5] = c.y; r[6] = d.x; r[7] = d.y; \
  }
#else
layout(std430, binding = 1) readonly buffer KCache4 { vec4 kc4[]; };
layout(std430, binding = 2) readonly buffer VCache4 { vec4 vc4[]; };
#define LOAD8(buf4, off, r)                  \
  {                                          \
    vec4 a = buf4[(off) >> 2];               \
    vec4 b = buf4[((off) >> 2) + 1u];        \
    r[0] = a.x; r[1] = a.y; r[2] = a.z; r[3] = a.w; \
    r[4] = b.x; r[5] = b.y; r[6] = b.z; r[7] = b.w; \
  }
#endif

bool sees(uint c, int ts, int tp) {
  int cp = cell_pos[c];
  return cell_seq[c] == ts && cp <= tp && (p.window <= 0 || tp - cp < p.window);
}

float qv[HEAD_DIM];

float score(uint base) {
  float s = 0.0;
  [[unroll]] for (uint j = 0u; j < HEAD_DIM; j += 8u) {
    float k[8];
    LOAD8(kc4, base + j, k)
    [[unroll]] for (uint u = 0u; u < 8u; ++u) s += k[u] * qv[j + u];
  }
  s *= p.scale;
  if (p.softcap > 0.0) s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
  return s;
}

void main() {
  uint n_q = p.n_head * p.n_tok;
  uint i = group_index() * BLOCK + gl_LocalInvocationID.x;
  uint iq = min(i, n_q - 1u);
  uint t = iq / p.n_head, h = iq % p.n_head;
  uint hk = h / (p.n_head / p.n_head_kv);
  int ts = tok_seq[t], tp = tok_pos[t];

  // The cells this token sees lie in [c_lo, c_hi): a prompt's tokens see only the cells before
  // theirs, and the passes below run only over that range.
  uint c_lo = p.n_cells, c_hi = 0u;
  if (i < n_q)
    for (uint c = 0u; c < p.n_cells; ++c)
      if (sees(c, ts, tp)) {
        c_lo = min(c_lo, c);
        c_hi = c + 1u;
      }

  uint qoff = t * p.q_row + h * HEAD_DIM;
  [[unroll]] for (uint j = 0u; j < HEAD_DIM; ++j) {
    float v = q[qoff + j];
#if KV_F16
    v = round_f16(v);
#endif
    qv[j] = v;
  }
  const float neg_inf = uintBitsToFloat(0xff800000u);
  float m = neg_inf, l = 0.0;
  for (uint c = c_lo; c < c_hi; ++c) {
    if (!sees(c, ts, tp)) continue;
    float s = score(c * p.k_row + hk * HEAD_DIM);
    float mn = max(m, s);
    l = (m == neg_inf ? 0.0 : l * exp(m - mn)) + exp(s - mn);
    m = mn;
  }

  float acc[HEAD_DIM];
  [[unroll]] for (uint j = 0u; j < HEAD_DIM; ++j) acc[j] = 0.0;
  if (m != neg_inf) {
    float inv = 1.0 / l;
    for (uint c = c_lo; c < c_hi; ++c) {
      if (!sees(c, ts, tp)) continue;
      float w = exp(score(c * p.k_row + hk * HEAD_DIM) - m) * inv;
#if KV_F16
      w = round_f16(w);
#endif
      uint base = c * p.v_row + hk * HEAD_DIM;
      [[unroll]] for (uint j = 0u; j < HEAD_DIM; j += 8u) {
        float v[8];
        LOAD8(vc4, base + j, v)
        [[unroll]] for (uint u = 0u; u < 8u; ++u) acc[j + u] += w * v[u];
      }
    }
  }
  if (i < n_q)
    [[unroll]] for (uint j = 0u; j < HEAD_DIM; ++j) dst[t * p.out_row + h * HEAD_DIM + j] = acc[j];
}
#else
shared float qs[MAX_HEAD_DIM];
shared float wts[BLOCK];

float cache_value(uint which, uint idx) {
#if KV_F16
  return which == 0u ? f16_bits_to_f32(LOAD_U16(kc, 2u * idx)) : f16_bits_to_f32(LOAD_U16(vc, 2u * idx));
#else
  return which == 0u ? uintBitsToFloat(kc[idx]) : uintBitsToFloat(vc[idx]);
#endif
}

float score(uint c, uint hk) {
  uint base = c * p.k_row + hk * p.head_dim_k;
  float s = 0.0;
  for (uint j = 0; j < p.head_dim_k; ++j) s += cache_value(0u, base + j) * qs[j];
  s *= p.scale;
  if (p.softcap > 0.0) s = p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0));
  return s;
}

void main() {
  uint h = gl_WorkGroupID.x;
  uint t = gl_WorkGroupID.y;
  uint hk = h / (p.n_head / p.n_head_kv);
  uint tid = gl_LocalInvocationID.x;
  int ts = tok_seq[t], tp = tok_pos[t];

  for (uint j = tid; j < p.head_dim_k; j += BLOCK) {
    float v = q[t * p.q_row + h * p.head_dim_k + j];
#if KV_F16
    v = round_f16(v);
#endif
    qs[j] = v;
  }
  barrier();

  const float neg_inf = uintBitsToFloat(0xff800000u);
  float m = neg_inf, l = 0.0;
  float kept[KEPT_SCORES];
  for (uint c = tid, i = 0u; c < p.n_cells; c += BLOCK, ++i) {
    int cp = cell_pos[c];
    if (cell_seq[c] != ts || cp > tp || (p.window > 0 && tp - cp >= p.window)) continue;
    float s = score(c, hk);
    if (i < KEPT_SCORES) kept[i] = s;
    float mn = max(m, s);
    l = (m == neg_inf ? 0.0 : l * exp(m - mn)) + exp(s - mn);
    m = mn;
  }
  float gm = block_max(m);
  float gl = block_sum(m == neg_inf ? 0.0 : l * exp(m - gm));

  float acc[MAX_HEAD_DIM / BLOCK + 1];
  for (uint k = 0; k < MAX_HEAD_DIM / BLOCK + 1; ++k) acc[k] = 0.0;
  if (gm != neg_inf) {  // uniform over the workgroup
    float inv = 1.0 / gl;
    for (uint c0 = 0; c0 < p.n_cells; c0 += BLOCK) {
      uint c = c0 + tid;
      float w = 0.0;
      if (c < p.n_cells) {
        int cp = cell_pos[c];
        if (cell_seq[c] == ts && cp <= tp && (p.window <= 0 || tp - cp < p.window)) {
          uint i = c0 / BLOCK;
          w = exp((i < KEPT_SCORES ? kept[i] : score(c, hk)) - gm) * inv;
#if KV_F16
          w = round_f16(w);
#endif
        }
      }
      wts[tid] = w;
      barrier();
      uint n = min(uint(BLOCK), p.n_cells - c0);
      for (uint i = 0; i < n; ++i) {
        float wi = wts[i];
        if (wi == 0.0) continue;
        uint base = (c0 + i) * p.v_row + hk * p.head_dim_v;
        for (uint k = 0; k * BLOCK + tid < p.head_dim_v; ++k)
          acc[k] += wi * cache_value(1u, base + k * BLOCK + tid);
      }
      barrier();
    }
  }
  for (uint k = 0; k * BLOCK + tid < p.head_dim_v; ++k)
    dst[t * p.out_row + h * p.head_dim_v + k * BLOCK + tid] = acc[k];
}
#endif
