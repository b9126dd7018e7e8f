#include <stdexcept>

#include "backends/vulkan/ops.h"

namespace hearth::vk {

void op_kv_store(device& d, const tensor& src, const tensor& cells, const tensor& cache) {
  if (cache.type != tensor_type::f16 && cache.type != tensor_type::f32)
    throw std::runtime_error("vulkan: kv_store into a " +
                             std::string(tensor_type_name(cache.type)) + " cache");
  if (cache.type == tensor_type::f16 && src.ne[0] % 2 != 0)
    throw std::runtime_error("vulkan: kv_store into an F16 cache needs an even row width");
  struct {
    uint32_t cols, n_tok;
  } pc{uint32_t(src.ne[0]), uint32_t(src.ne[1])};
  const groups g = groups_for(src.ne[1]);
  d.dispatch(cache.type == tensor_type::f16 ? "kv_store_f16" : "kv_store_f32",
             {buf(src), buf(cells), buf(cache)}, &pc, sizeof(pc), g.x, g.y, 1);
}

}  // namespace hearth::vk
