#include "node/hardware.h"

#include "engine/system-info.h"
#include "gpu/discovery.h"

namespace hearth::node {

wire::hardware_info hardware_discover() {
  const system_info sys = system_info_read();
  wire::hardware_info h;
  h.cpu_model = sys.cpu_model.empty() ? "unknown CPU" : sys.cpu_model;
  h.cpu_threads = uint32_t(sys.n_threads);
  h.memory_total = sys.mem_total;
  h.memory_available = sys.mem_available;
  for (const auto& d : gpu::discover()) {
    // A CPU implementation of Vulkan (lavapipe) is not a GPU worth scheduling on.
    if (d.type == "cpu") continue;
    wire::gpu_info g{d.backend, d.name, d.memory_total,      d.memory_free, d.vendor,
                     d.type,    {},     d.compute_capability};
    for (const auto& heap : d.heaps) g.heaps.push_back({heap.size, heap.device_local});
    h.gpus.push_back(std::move(g));
  }
  return h;
}

}  // namespace hearth::node
