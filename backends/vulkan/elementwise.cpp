#include <string>

#include "backends/vulkan/ops.h"

namespace hearth::vk {

void op_elementwise(device& d, const char* op, const tensor& a, const tensor* b, float param0,
                    float param1, const tensor& out) {
  struct {
    uint32_t n;
    float param0, param1;
  } pc{uint32_t(a.n_elements()), param0, param1};
  const groups g = groups_for((a.n_elements() + 63) / 64);  // BLOCK of elementwise.comp
  d.dispatch((std::string("elementwise_") + op).c_str(), {buf(a), b ? buf(*b) : nullptr, buf(out)},
             &pc, sizeof(pc), g.x, g.y, 1);
}

}  // namespace hearth::vk
