// Elementwise ops: residual adds and gated activations.
#include <cmath>

#include "engine/cpu/backend-cpu.h"

namespace hearth::cpu {

void op_swiglu(thread_pool& pool, const tensor& gate, const tensor& up, const tensor& out) {
  const float* g = static_cast<const float*>(gate.data);
  const float* u = static_cast<const float*>(up.data);
  float* y = static_cast<float*>(out.data);
  pool.parallel_for(
      gate.n_elements(),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      },
      8);
}

void op_add(thread_pool& pool, const tensor& a, const tensor& b, const tensor& out) {
  const float* x = static_cast<const float*>(a.data);
  const float* z = static_cast<const float*>(b.data);
  float* y = static_cast<float*>(out.data);
  pool.parallel_for(a.n_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = x[i] + z[i];
  });
}

}  // namespace hearth::cpu
