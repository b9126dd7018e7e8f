// Elementwise ops: residual adds, scaling, soft-capping and gated activations.
#include <array>
#include <cmath>

#include "engine/cpu/backend-cpu.h"

namespace hearth::cpu {
namespace {

// y[i] = f(x[i]) over all elements, split across the pool.
template <typename F>
void map(thread_pool& pool, const tensor& x, const tensor& out, F f) {
  const float* a = static_cast<const float*>(x.data);
  float* y = static_cast<float*>(out.data);
  pool.parallel_for(
      x.n_elements(),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) y[i] = f(a[i]);
      },
      8);
}

// y[i] = f(a[i], b[i]).
template <typename F>
void zip(thread_pool& pool, const tensor& a, const tensor& b, const tensor& out, F f) {
  const float* x = static_cast<const float*>(a.data);
  const float* z = static_cast<const float*>(b.data);
  float* y = static_cast<float*>(out.data);
  pool.parallel_for(
      a.n_elements(),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) y[i] = f(x[i], z[i]);
      },
      8);
}

float gelu_tanh(float x) {
  constexpr float k_sqrt_2_over_pi = 0.79788456080286535587989211986876f;
  constexpr float k_coef_a = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(k_sqrt_2_over_pi * x * (1.0f + k_coef_a * x * x)));
}

// GELU as the reference engine computes it on the CPU: the input rounded to F16 and looked up
// in a table of F16 results (exact beyond ±10). Matching its rounding keeps Gemma's logits
// within the F32 conformance bound; the exact function differs by up to ~1e-3 relative.
float gelu_reference(float x) {
  static const auto table = [] {
    std::array<uint16_t, 65536> t{};
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(uint16_t(i))));
    return t;
  }();
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(table[fp32_to_fp16(x)]);
}

}  // namespace

void op_swiglu(thread_pool& pool, const tensor& gate, const tensor& up, const tensor& out) {
  zip(pool, gate, up, out, [](float g, float u) { return g / (1.0f + std::exp(-g)) * u; });
}

void op_geglu(thread_pool& pool, const tensor& gate, const tensor& up, const tensor& out) {
  zip(pool, gate, up, out, [](float g, float u) { return gelu_reference(g) * u; });
}

void op_add(thread_pool& pool, const tensor& a, const tensor& b, const tensor& out) {
  zip(pool, a, b, out, [](float x, float y) { return x + y; });
}

void op_scale(thread_pool& pool, const tensor& x, float s, const tensor& out) {
  map(pool, x, out, [s](float v) { return v * s; });
}

void op_softcap(thread_pool& pool, const tensor& x, float cap, const tensor& out) {
  // As the reference: a multiply by 1/cap, tanh, a multiply by cap.
  const float inv = 1.0f / cap;
  map(pool, x, out, [cap, inv](float v) { return cap * std::tanh(v * inv); });
}

}  // namespace hearth::cpu
