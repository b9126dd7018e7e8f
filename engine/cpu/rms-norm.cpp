#include <cmath>

#include "engine/cpu/backend-cpu.h"

namespace hearth::cpu {

void op_rms_norm(thread_pool& pool, const tensor& x, const tensor& weight, float eps,
                 const tensor& out) {
  const int64_t n = x.ne[0];
  const float* w = weight.present() ? static_cast<const float*>(weight.data) : nullptr;
  pool.parallel_for(
      x.rows(),
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* xr = static_cast<const float*>(x.data) + r * n;
          float* yr = static_cast<float*>(out.data) + r * n;
          // The sum of squares in double, as the reference engine accumulates it.
          double sum = 0;
          for (int64_t i = 0; i < n; ++i) sum += double(xr[i]) * double(xr[i]);
          const float scale = 1.0f / std::sqrt(float(sum / double(n)) + eps);
          if (w) {
            for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale * w[i];
          } else {
            for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
          }
        }
      },
      n * 2);
}

}  // namespace hearth::cpu
