#include <cmath>

#include "engine/cpu/backend-cpu.h"

namespace hearth::cpu {

void op_rope(thread_pool& pool, const tensor& x, int32_t n_head, int32_t head_dim,
             const tensor& pos, const rope_params& p, const tensor* freq_factors) {
  const int64_t n_tok = x.ne[1];
  const int32_t* positions = static_cast<const int32_t*>(pos.data);
  const float* ff = freq_factors && freq_factors->present()
                        ? static_cast<const float*>(freq_factors->data)
                        : nullptr;
  const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_dims));
  const int32_t half = p.n_dims / 2;
  const int64_t row = x.ne[0];
  const rope_yarn_terms yarn = rope_yarn_terms_of(p);

  pool.parallel_for(
      n_tok,
      [&](int64_t begin, int64_t end) {
        float cache_cos[1024], cache_sin[1024];  // half of n_dims; head sizes stay far below 2048
        for (int64_t t = begin; t < end; ++t) {
          // theta_i = pos * scale * base^(-2i/n_dims), computed by repeated multiplication in float
          // as the reference does, so both agree to the last bit on the angle.
          float theta = float(positions[t]);
          for (int32_t i = 0; i < half; ++i) {
            const float extrap = ff ? theta / ff[i] : theta;
            float th = p.freq_scale * extrap;
            if (p.ext_factor != 0.0f) {  // YaRN, as ggml's rope_yarn
              const float mix = rope_yarn_mix(yarn, i, p.ext_factor);
              th = th * (1 - mix) + extrap * mix;
            }
            cache_cos[i] = std::cos(th) * yarn.mscale;
            cache_sin[i] = std::sin(th) * yarn.mscale;
            theta *= theta_scale;
          }
          float* xr = static_cast<float*>(x.data) + t * row;
          for (int32_t h = 0; h < n_head; ++h) {
            float* v = xr + int64_t(h) * head_dim;
            for (int32_t i = 0; i < half; ++i) {
              // neox rotates (i, i + n_dims/2); the llama layout rotates (2i, 2i + 1).
              const int32_t a = p.neox ? i : 2 * i;
              const int32_t b = p.neox ? i + half : 2 * i + 1;
              const float x0 = v[a], x1 = v[b];
              v[a] = x0 * cache_cos[i] - x1 * cache_sin[i];
              v[b] = x0 * cache_sin[i] + x1 * cache_cos[i];
            }
          }
        }
      },
      int64_t(half) * 16 + row);
}

}  // namespace hearth::cpu
