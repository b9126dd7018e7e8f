// The CPU rope (engine/cpu/rope.cpp) against the formulas written out directly in double: the
// plain rotation (what every model without scaling computes, bit for bit as before YaRN came),
// and YaRN as ggml defines it (ggml_rope_yarn_corr_dims, rope_yarn_ramp, rope_yarn's mscale),
// on both pair layouts, with partial rotation and frequency factors.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "engine/backend.h"

namespace hearth {
namespace {

struct rope_case {
  bool neox;
  int32_t n_dims;
  bool with_ff;
  float ext_factor, attn_factor, freq_scale;
};

// x rotated as YaRN's paper and ggml define it, in double: pair i has frequency
// base^(-2i/n_dims) / ff[i]; its angle mixes pos · freq · freq_scale (interpolated) and pos · freq
// (extrapolated) by ramp(i) · ext_factor, where ramp is 1 below the correction dimension of
// beta_fast rotations over n_ctx_orig positions and 0 above that of beta_slow; cos and sin are
// scaled by attn_factor · (1 + 0.1 ln(1 / freq_scale)) when ext_factor is not 0.
std::vector<double> direct(const std::vector<float>& x, int32_t n_head, int32_t head_dim,
                           const std::vector<int32_t>& pos, const rope_params& p,
                           const std::vector<float>& ff) {
  std::vector<double> out(x.begin(), x.end());
  const int32_t half = p.n_dims / 2;
  auto corr_dim = [&](double n_rot) {
    return p.n_dims * std::log(p.n_ctx_orig / (n_rot * 2 * std::numbers::pi)) /
           (2 * std::log(double(p.freq_base)));
  };
  const double low = std::max(0.0, std::floor(corr_dim(p.beta_fast)));
  const double high = std::min(double(p.n_dims - 1), std::ceil(corr_dim(p.beta_slow)));
  double mscale = p.attn_factor;
  if (p.ext_factor != 0) mscale *= 1 + 0.1 * std::log(1.0 / p.freq_scale);
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int32_t i = 0; i < half; ++i) {
      double freq = std::pow(double(p.freq_base), -2.0 * i / p.n_dims);
      if (!ff.empty()) freq /= ff[size_t(i)];
      const double extrap = pos[t] * freq, interp = extrap * p.freq_scale;
      double theta = interp;
      if (p.ext_factor != 0) {
        const double y = (i - low) / std::max(0.001, high - low);
        const double mix = (1 - std::clamp(y, 0.0, 1.0)) * p.ext_factor;
        theta = interp * (1 - mix) + extrap * mix;
      }
      const double c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
      for (int32_t h = 0; h < n_head; ++h) {
        const size_t base = t * size_t(n_head * head_dim) + size_t(h * head_dim);
        const size_t a = base + size_t(p.neox ? i : 2 * i);
        const size_t b = base + size_t(p.neox ? i + half : 2 * i + 1);
        const double x0 = x[a], x1 = x[b];
        out[a] = x0 * c - x1 * s;
        out[b] = x0 * s + x1 * c;
      }
    }
  }
  return out;
}

TEST(cpu_rope, matches_the_direct_formula_plain_and_yarn) {
  const rope_case cases[] = {
      {false, 128, false, 0.0f, 1.0f, 1.0f},  {true, 128, false, 0.0f, 1.0f, 0.25f},
      {true, 64, true, 0.0f, 1.0f, 1.0f},     {false, 128, false, 1.0f, 1.0f, 0.25f},
      {true, 128, false, 1.0f, 1.0f, 0.25f},  {true, 64, true, 1.0f, 1.0f, 0.125f},
      {false, 128, true, 0.5f, 0.75f, 0.25f},
  };
  const int32_t head_dim = 128, n_head = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto be = make_cpu_backend(2);
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "neox " << c.neox << " dims " << c.n_dims << " ff " << c.with_ff << " ext "
                 << c.ext_factor << " attn " << c.attn_factor << " scale " << c.freq_scale);
    rope_params p;
    p.n_dims = c.n_dims;
    p.freq_base = 1000000.0f;
    p.freq_scale = c.freq_scale;
    p.neox = c.neox;
    p.ext_factor = c.ext_factor;
    p.attn_factor = c.attn_factor;
    p.n_ctx_orig = 32768;
    // Positions up to 100k: the angles of the fast pairs are large, so compare with a bound
    // that grows with them (float angles carry pos · 2^-24 of error).
    const std::vector<int32_t> pos = {0, 1, 17, 4095, 32768, 99999};
    const int64_t n_tok = int64_t(pos.size()), row = int64_t(n_head) * head_dim;
    std::vector<float> x(size_t(row * n_tok)), ff;
    for (auto& v : x) v = normal(rng);
    for (int32_t i = 0; c.with_ff && i < c.n_dims / 2; ++i) ff.push_back(1.0f + float(i % 7));

    tensor xt = be->alloc(tensor_type::f32, row, n_tok, "x");
    tensor pt = be->alloc(tensor_type::i32, n_tok, 1, "pos");
    tensor ft = be->alloc(tensor_type::f32, std::max<int64_t>(1, int64_t(ff.size())), 1, "ff");
    be->upload(xt, x.data(), x.size() * 4);
    be->upload(pt, pos.data(), pos.size() * 4);
    if (!ff.empty()) be->upload(ft, ff.data(), ff.size() * 4);
    be->rope(xt, n_head, head_dim, pt, p, ff.empty() ? nullptr : &ft);
    const float* got = static_cast<const float*>(xt.data);
    const std::vector<double> want = direct(x, n_head, head_dim, pos, p, ff);
    size_t bad = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      const double bound = 1e-6 + 4e-7 * double(pos[k / size_t(row)]) * 3;
      if (std::abs(got[k] - want[k]) > bound && ++bad <= 5) {
        ADD_FAILURE() << "element " << k << " (token " << k / size_t(row) << ", dim "
                      << k % size_t(head_dim) << "): got " << got[k] << ", expected " << want[k];
      }
    }
    EXPECT_EQ(bad, 0u);
    for (auto* t : {&xt, &pt, &ft}) be->free(*t);
  }
}

// The YaRN terms are those of ggml for Qwen3's 128k setting (factor 4 over 32768, base 1e6,
// head 128): correction dimensions floor(20.94) = 20 and ceil(45.03) = 46, and the magnitude
// 1 + 0.1 ln 4.
TEST(cpu_rope, yarn_terms_for_qwen3_128k) {
  rope_params p;
  p.n_dims = 128;
  p.freq_base = 1000000.0f;
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.n_ctx_orig = 32768;
  const rope_yarn_terms t = rope_yarn_terms_of(p);
  auto dim = [](double rot) {
    return 128 * std::log(32768 / (rot * 2 * std::numbers::pi)) / (2 * std::log(1e6));
  };
  EXPECT_EQ(t.corr_low, std::floor(dim(32)));
  EXPECT_EQ(t.corr_high, std::ceil(dim(1)));
  EXPECT_NEAR(t.mscale, 1 + 0.1 * std::log(4.0), 1e-6);
  EXPECT_EQ(rope_yarn_mix(t, 0, 1.0f), 1.0f);
  EXPECT_EQ(rope_yarn_mix(t, 63, 1.0f), 0.0f);
  p.ext_factor = 0.0f;  // off: no ramp, magnitude attn_factor
  EXPECT_EQ(rope_yarn_terms_of(p).mscale, 1.0f);
}

}  // namespace
}  // namespace hearth
