#include <cmath>

#include "backends/vulkan/ops.h"

namespace hearth::vk {

void op_rope(device& d, const tensor& x, int32_t n_head, int32_t head_dim, const tensor& pos,
             const rope_params& p, const tensor* freq_factors) {
  const rope_yarn_terms yarn = rope_yarn_terms_of(p);
  struct {
    uint32_t row, n_tok, n_head, head_dim, half_dims, neox, has_ff;
    float theta_scale, freq_scale, ext_factor, mscale, corr_low, corr_high;
  } pc{uint32_t(x.ne[0]),
       uint32_t(x.ne[1]),
       uint32_t(n_head),
       uint32_t(head_dim),
       uint32_t(p.n_dims / 2),
       p.neox ? 1u : 0u,
       freq_factors && freq_factors->present() ? 1u : 0u,
       std::pow(p.freq_base, -2.0f / float(p.n_dims)),  // as engine/cpu/rope.cpp
       p.freq_scale,
       p.ext_factor,
       yarn.mscale,
       yarn.corr_low,
       yarn.corr_high};
  const groups g = groups_for(x.ne[1]);
  d.dispatch("rope", {buf(x), buf(pos), buf_or_null(freq_factors)}, &pc, sizeof(pc), g.x, g.y, 1);
}

}  // namespace hearth::vk
