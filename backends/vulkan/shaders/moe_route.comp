// The mixture-of-experts router: per token, softmax over its n_expert logits (max subtracted),
// the k most probable experts (equal probabilities: the lower id first), their probabilities,
// divided by their clamped sum when normalising. One invocation per token: a router has tens to a
// few hundred experts and k <= 8, and keeping each token in one invocation needs no scratch array:
// the k selections rescan the logits, recomputing each probability with the same instructions,
// so equal values compare equal in every pass.
#version 450
#include "common.glsl"

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer Logits { float logits[]; };  // F32 [n_tok, n_expert]
layout(std430, binding = 1) writeonly buffer Ids { int ids[]; };         // I32 [n_tok, k]
layout(std430, binding = 2) buffer Weights { float weights[]; };         // F32 [n_tok, k]
layout(push_constant) uniform Params {
  uint n_expert;
  uint n_tok;
  uint k;
  uint normalize;
} p;

void main() {
  uint t = group_index() * BLOCK + gl_LocalInvocationID.x;
  if (t >= p.n_tok) return;
  uint base = t * p.n_expert;
  float mx = uintBitsToFloat(0xff800000u);  // -inf
  for (uint e = 0; e < p.n_expert; ++e) mx = max(mx, logits[base + e]);
  float sum = 0.0;
  for (uint e = 0; e < p.n_expert; ++e) sum += exp(logits[base + e] - mx);
  float inv = 1.0 / sum;
  // Each pass takes the best expert ordered after the previous pass's choice in the order
  // (probability decreasing, id increasing).
  float prev_p = 0.0;
  uint prev_e = 0u;
  float chosen = 0.0;
  for (uint j = 0; j < p.k; ++j) {
    uint best = p.n_expert;
    float best_p = 0.0;
    for (uint e = 0; e < p.n_expert; ++e) {
      float pe = exp(logits[base + e] - mx) * inv;
      bool after = j == 0u || pe < prev_p || (pe == prev_p && e > prev_e);
      if (after && (best == p.n_expert || pe > best_p)) {  // strict: ties keep the lower id
        best = e;
        best_p = pe;
      }
    }
    // NaN logits compare false everywhere: expert 0 keeps the ids within the contract's range.
    if (best == p.n_expert) best = 0u;
    ids[t * p.k + j] = int(best);
    weights[t * p.k + j] = best_p;
    chosen += best_p;
    prev_p = best_p;
    prev_e = best;
  }
  if (p.normalize != 0u) {
    // As the reference: the sum clamped away from 0 (all k probabilities underflowing).
    chosen = max(chosen, 6.103515625e-5);
    for (uint j = 0; j < p.k; ++j) weights[t * p.k + j] /= chosen;
  }
}
