#include "backends/vulkan/ops.h"

namespace hearth::vk {

void op_rms_norm(device& d, const tensor& x, const tensor& weight, float eps, const tensor& out) {
  struct {
    uint32_t cols, n_rows, has_weight;
    float eps;
  } pc{uint32_t(x.ne[0]), uint32_t(x.rows()), weight.present() ? 1u : 0u, eps};
  const groups g = groups_for(x.rows());
  d.dispatch(d.subgroup_arithmetic() ? "rms_norm_sg" : "rms_norm",
             {buf(x), buf_or_null(&weight), buf(out)}, &pc, sizeof(pc), g.x, g.y, 1);
}

}  // namespace hearth::vk
