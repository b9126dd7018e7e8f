#include "node/hardware.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <set>

#include "backends/registry.h"
#include "engine/system-info.h"

namespace hearth::node {

wire::gpu_info gpu_info_from(const gpu::device& d) {
  wire::gpu_info g;
  g.backend = gpu::backend_kind_name(d.backend);
  g.name = d.name;
  g.memory_total = d.memory_total;
  g.memory_free = d.memory_available();  // the protocol has no "unknown": the total then
  g.vendor = d.vendor;
  g.type = gpu::device_type_name(d.type);
  for (const auto& heap : d.heaps) g.heaps.push_back({heap.size, heap.device_local});
  g.compute_capability = d.compute_capability;
  g.utilization = d.utilization;
  return g;
}

wire::hardware_info hardware_discover() {
  // Which backends this node has, and why the others are missing, once at start.
  for (const std::string& line : gpu::registry_report(gpu::device_registry())) {
    spdlog::info("backend {}", line);
  }
  return hardware_read();
}

wire::hardware_info hardware_read(const gpu::registry& devices) {
  const system_info sys = system_info_read();
  wire::hardware_info h;
  h.cpu_model = sys.cpu_model.empty() ? "unknown CPU" : sys.cpu_model;
  h.cpu_threads = uint32_t(sys.n_threads);
  h.memory_total = sys.mem_total;
  h.memory_available = sys.mem_available;
  std::set<std::string> cards;  // UUIDs listed
  for (const auto& e : devices.backends()) {
    if (e.kind == gpu::backend_kind::cpu || !e.loaded) continue;
    for (const auto& d : e.devices()) {
      // A CPU implementation of Vulkan (lavapipe) is not a GPU worth scheduling on.
      if (d.type == gpu::device_type::cpu) continue;
      if (!d.uuid.empty() && !cards.insert(d.uuid).second) continue;
      h.gpus.push_back(gpu_info_from(d));
    }
  }
  return h;
}

bool hardware_changed(const wire::hardware_info& sent, const wire::hardware_info& now) {
  constexpr uint64_t k_memory_step = 64ull << 20;
  constexpr double k_utilization_step = 0.05;
  auto moved = [](uint64_t a, uint64_t b) { return (a > b ? a - b : b - a) >= k_memory_step; };
  if (moved(sent.memory_available, now.memory_available)) return true;
  if (sent.gpus.size() != now.gpus.size()) return true;
  for (size_t i = 0; i < now.gpus.size(); ++i) {
    const auto &a = sent.gpus[i], &b = now.gpus[i];
    if (a.name != b.name || a.backend != b.backend || moved(a.memory_free, b.memory_free)) {
      return true;
    }
    if ((a.utilization < 0) != (b.utilization < 0) ||
        std::abs(a.utilization - b.utilization) >= k_utilization_step - 1e-9) {
      return true;
    }
  }
  return false;
}

}  // namespace hearth::node
