#include "backends/registry.h"

#include "backends/modules.h"
#include "engine/system-info.h"

namespace hearth::gpu {

const backend_entry* registry::find(backend_kind k) const {
  for (const auto& e : entries_)
    if (e.kind == k) return &e;
  return nullptr;
}

bool registry::best(backend_kind k, device& out, const backend_entry*& entry) const {
  bool found = false;
  int found_order = 0;
  for (size_t order = 0; order < entries_.size(); ++order) {
    const backend_entry& e = entries_[order];
    const bool wanted = k == backend_kind::automatic ? e.kind != backend_kind::cpu : e.kind == k;
    if (!wanted || !e.loaded || !e.devices) continue;
    for (const device& d : e.devices()) {
      if (k == backend_kind::automatic && d.type == device_type::cpu) continue;
      if (!found || device_better(d, int(order), out, found_order)) {
        out = d;
        entry = &e;
        found_order = int(order);
        found = true;
      }
    }
  }
  return found;
}

std::string registry::why_no_device(backend_kind k) const {
  const backend_entry* e = find(k);
  if (!e) return std::string("no ") + backend_kind_name(k) + " backend";
  if (!e->loaded) return "not loaded: " + e->why;
  if (e->devices().empty()) return "no device" + (e->why.empty() ? "" : ": " + e->why);
  return "";
}

namespace {

// The CPU backend as the registry lists it: one device, the machine's processor and memory.
backend_entry cpu_entry() {
  backend_entry e;
  e.kind = backend_kind::cpu;
  e.name = "cpu";
  e.title = "CPU";
  e.loaded = true;
  e.devices = [] {
    const system_info sys = system_info_read();
    device d;
    d.name = sys.cpu_model.empty() ? "unknown CPU" : sys.cpu_model;
    d.backend = backend_kind::cpu;
    d.type = device_type::cpu;
    d.memory_total = sys.mem_total;
    d.memory_free = sys.mem_available;
    d.detail = std::to_string(sys.n_threads) + " threads, " + sys.cpu_kernels + " kernels";
    return std::vector<device>{d};
  };
  e.make = [](int) { return make_cpu_backend(0); };
  return e;
}

}  // namespace

const registry& device_registry() {
  // Made once and never destroyed: the modules stay loaded until the process ends (a Vulkan
  // driver unloaded at exit leaks; see backends/vulkan/device.cpp).
  static const registry* r = [] {
    auto* made = new registry;
    made->add(cpu_entry());
    made->add(backend_module_load(backend_kind::cuda, "CUDA"));
    made->add(backend_module_load(backend_kind::vulkan, "Vulkan"));
    return made;
  }();
  return *r;
}

std::vector<std::string> registry_report(const registry& r) {
  std::vector<std::string> out;
  for (const auto& e : r.backends()) {
    if (!e.loaded) {
      out.push_back(e.name + ": not loaded: " + e.why);
      continue;
    }
    const size_t n = e.devices ? e.devices().size() : 0;
    if (n == 0) {
      out.push_back(e.name + ": loaded, no device" + (e.why.empty() ? "" : ": " + e.why));
      continue;
    }
    out.push_back(e.name + ": loaded, " + std::to_string(n) + " device" + (n == 1 ? "" : "s"));
  }
  return out;
}

}  // namespace hearth::gpu
