// Causal attention over the KV cache; one workgroup per (head, token). The mask is derived from
// cell_seq/cell_pos/tok_seq/tok_pos as the CPU does (engine/cpu/attention.cpp). Pass 1 computes
// the scores of cells tid, tid + BLOCK, ... and finds the softmax max and sum (online, per
// invocation, then reduced); pass 2 takes the cells in chunks of BLOCK: invocation tid turns cell
// c0 + tid's score, which it computed in pass 1 and kept (the first KEPT_SCORES of each
// invocation; beyond, computed again), into its weight (rounded to F16 for an F16 V cache, as the
// CPU does), then each invocation accumulates its output dimensions over the chunk.
// KV_F16: both caches F16 (q is rounded to F16 first, as the CPU does), else F32. USE_SUBGROUP.
#version 450
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
} p;

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
