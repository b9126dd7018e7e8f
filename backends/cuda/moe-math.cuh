// The router's math (backend::moe_route) as the CUDA kernel runs it, one warp per token, and as
// moe-math_test.cpp runs it on the host against the CPU backend's op (engine/cpu/moe.cpp): the
// softmax's terms, the rank order of (probability, expert) pairs and one lane's share of each
// scan. The warp's reductions combine the lanes' shares: fmaxf for the maximum and rank order
// for the picks (both give one answer whatever the order of combining), a double sum for the
// softmax's denominator. Plain C++ when not compiled by nvcc.
#pragma once

#include <cmath>
#include <cstdint>

#include "backends/cuda/hd.h"

namespace hearth::cuda {

// The floor of the sum of the k chosen probabilities before they are divided by it (the CPU's
// and the reference's clamp, for when all k underflow to 0).
constexpr float k_moe_route_min_sum = 6.103515625e-5f;

// One expert and its probability. e == -1: none (a lane with no expert left to offer).
struct moe_route_pick {
  float p = -INFINITY;
  int32_t e = -1;
};

// Whether `a` comes before `b` in the router's order: higher probability first, equal
// probabilities the lower expert id first, and a real pick before none.
HEARTH_HD bool moe_route_before(moe_route_pick a, moe_route_pick b) {
  if (b.e < 0) return a.e >= 0;
  if (a.e < 0) return false;
  return a.p > b.p || (a.p == b.p && a.e < b.e);
}

// The softmax's term for one logit: exp(logit - max) as a float, as the CPU computes it.
HEARTH_HD float moe_route_exp(float logit, float mx) {
  return expf(logit - mx);
}

// Lane `lane` of `n_lanes`: the largest of its logits (experts lane, lane + n_lanes, ...).
HEARTH_HD float moe_route_lane_max(const float* logits, int32_t n_expert, int lane, int n_lanes) {
  float mx = -INFINITY;
  for (int32_t e = lane; e < n_expert; e += n_lanes) mx = fmaxf(mx, logits[e]);
  return mx;
}

// The lane's share of the softmax's denominator, summed in double as the CPU sums it.
HEARTH_HD double moe_route_lane_sum(const float* logits, int32_t n_expert, int lane, int n_lanes,
                                    float mx) {
  double sum = 0;
  for (int32_t e = lane; e < n_expert; e += n_lanes) sum += double(moe_route_exp(logits[e], mx));
  return sum;
}

// The lane's first expert in the router's order among those after `prev` (the pick before; e ==
// -1 for the first pick), with probability exp(logit - mx) * inv. Picking k times, each after
// the one before, gives the top k without remembering which experts were taken.
HEARTH_HD moe_route_pick moe_route_lane_next(const float* logits, int32_t n_expert, int lane,
                                             int n_lanes, float mx, float inv,
                                             moe_route_pick prev) {
  moe_route_pick best;
  for (int32_t e = lane; e < n_expert; e += n_lanes) {
    const moe_route_pick c{moe_route_exp(logits[e], mx) * inv, e};
    if ((prev.e < 0 || moe_route_before(prev, c)) && moe_route_before(c, best)) best = c;
  }
  return best;
}

}  // namespace hearth::cuda
