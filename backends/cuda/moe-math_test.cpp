// The router's math (moe-math.cuh) put together as moe_route_kernel puts it together (32 lanes,
// reductions across them by xor shuffles), on the host against the CPU backend's moe_route: the
// same experts in the same order, the same weights up to the last bits of the softmax's sum.
// Runs on any machine: nothing here needs a GPU.
#include "backends/cuda/moe-math.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"

namespace hearth::cuda {
namespace {

constexpr int k_lanes = 32;

// The kernel's warp for one token, lane by lane. Each xor-shuffle step combines lane i with lane
// i ^ o, as __shfl_xor_sync does.
void route_like_the_kernel(const float* l, int32_t n_expert, int32_t k, bool normalize,
                           int32_t* ids, float* weights) {
  float mx_lane[k_lanes];
  for (int lane = 0; lane < k_lanes; ++lane)
    mx_lane[lane] = moe_route_lane_max(l, n_expert, lane, k_lanes);
  for (int o = 16; o > 0; o >>= 1) {
    float next[k_lanes];
    for (int lane = 0; lane < k_lanes; ++lane) next[lane] = fmaxf(mx_lane[lane], mx_lane[lane ^ o]);
    std::copy(next, next + k_lanes, mx_lane);
  }
  const float mx = mx_lane[0];
  double sum[k_lanes];
  for (int lane = 0; lane < k_lanes; ++lane)
    sum[lane] = moe_route_lane_sum(l, n_expert, lane, k_lanes, mx);
  for (int o = 16; o > 0; o >>= 1) {
    double next[k_lanes];
    for (int lane = 0; lane < k_lanes; ++lane) next[lane] = sum[lane] + sum[lane ^ o];
    std::copy(next, next + k_lanes, sum);
  }
  const float inv = float(1.0 / sum[0]);
  moe_route_pick prev;
  float chosen = 0;
  for (int32_t j = 0; j < k; ++j) {
    moe_route_pick best;
    for (int lane = 0; lane < k_lanes; ++lane) {
      const moe_route_pick c = moe_route_lane_next(l, n_expert, lane, k_lanes, mx, inv, prev);
      if (moe_route_before(c, best)) best = c;
    }
    prev = best;
    chosen += prev.p;
    ids[j] = prev.e;
    weights[j] = prev.p;
  }
  if (!normalize) return;
  chosen = fmaxf(chosen, k_moe_route_min_sum);
  for (int32_t j = 0; j < k; ++j) weights[j] /= chosen;
}

struct route_shape {
  int32_t n_expert, k;
  bool normalize;
};

TEST(CudaMoeMath, RoutingAsTheKernelDoesMatchesTheCpuBackend) {
  std::mt19937 rng(20);
  std::unique_ptr<backend> cpu = make_cpu_backend(1);
  for (const route_shape s :
       {route_shape{8, 2, false}, route_shape{8, 2, true}, route_shape{128, 8, true},
        route_shape{60, 4, true}, route_shape{33, 33, false}, route_shape{1, 1, true},
        route_shape{256, 8, false}}) {
    const int64_t n_tok = 37;
    std::vector<float> logits(size_t(n_tok * s.n_expert));
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (float& x : logits) x = nd(rng);
    // Ties: a token whose logits repeat (equal probabilities: the lower id first), one whose
    // logits are all equal, one whose probabilities but one underflow to 0 (equal zeros).
    for (int32_t e = 0; e < s.n_expert; ++e) {
      logits[size_t(s.n_expert + e)] = float(e % 3);
      logits[size_t(2 * s.n_expert + e)] = 0.5f;
      logits[size_t(3 * s.n_expert + e)] = e == s.n_expert - 1 ? 0.0f : -1000.0f;
    }
    tensor tl = cpu->alloc(tensor_type::f32, s.n_expert, n_tok, "logits");
    tensor ti = cpu->alloc(tensor_type::i32, s.k, n_tok, "ids");
    tensor tw = cpu->alloc(tensor_type::f32, s.k, n_tok, "weights");
    cpu->upload(tl, logits.data(), logits.size() * 4);
    cpu->moe_route(tl, s.normalize, ti, tw);
    std::vector<int32_t> ref_ids(size_t(n_tok * s.k));
    std::vector<float> ref_w(ref_ids.size());
    cpu->download(ti, ref_ids.data(), ref_ids.size() * 4);
    cpu->download(tw, ref_w.data(), ref_w.size() * 4);
    for (int64_t t = 0; t < n_tok; ++t) {
      std::vector<int32_t> ids(size_t(s.k));
      std::vector<float> w(size_t(s.k));
      route_like_the_kernel(logits.data() + t * s.n_expert, s.n_expert, s.k, s.normalize,
                            ids.data(), w.data());
      for (int32_t j = 0; j < s.k; ++j) {
        const size_t at = size_t(t * s.k + j);
        EXPECT_EQ(ids[size_t(j)], ref_ids[at])
            << "n_expert " << s.n_expert << " token " << t << " slot " << j;
        // The sum's order differs (32 lanes, then a tree): the inverse may differ in its last
        // bit, and with it each weight.
        EXPECT_NEAR(w[size_t(j)], ref_w[at], 4e-7f * std::max(1.0f, ref_w[at]))
            << "n_expert " << s.n_expert << " token " << t << " slot " << j;
      }
    }
    cpu->free(tl);
    cpu->free(ti);
    cpu->free(tw);
  }
}

TEST(CudaMoeMath, RankOrderIsTotal) {
  const moe_route_pick none;
  const moe_route_pick a{0.5f, 3}, b{0.5f, 7}, c{0.25f, 1};
  EXPECT_TRUE(moe_route_before(a, b));
  EXPECT_FALSE(moe_route_before(b, a));
  EXPECT_TRUE(moe_route_before(b, c));
  EXPECT_TRUE(moe_route_before(c, none));
  EXPECT_FALSE(moe_route_before(none, c));
  EXPECT_FALSE(moe_route_before(a, a));
  // Zero probabilities (underflow) still rank by id, ahead of no pick.
  EXPECT_TRUE(moe_route_before(moe_route_pick{0.0f, 2}, moe_route_pick{0.0f, 5}));
  EXPECT_TRUE(moe_route_before(moe_route_pick{0.0f, 5}, none));
}

}  // namespace
}  // namespace hearth::cuda
