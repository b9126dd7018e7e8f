// hearth devices: the devices models can run on (`--backend cuda|vulkan --device N`), from the
// device registry (backends/registry.h): CUDA's then Vulkan's, with what the driver says of each —
// vendor, type, memory, free memory and utilisation where the driver says (free: CUDA, Vulkan
// with VK_EXT_memory_budget; utilisation: CUDA through NVML), memory heaps, a backend-specific
// detail (compute capability, subgroup arithmetic) — and which backends loaded and why the others
// did not, as the node logs it at start.
#include <cstdio>

#include "backends/registry.h"
#include "engine/system-info.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct devices_options {
  bool json = false;
};

std::string heaps_text(const gpu::device& d) {
  std::string s;
  for (const auto& h : d.heaps)
    s += (s.empty() ? "" : ", ") + format_bytes(h.size) + (h.device_local ? " local" : " host");
  return or_dash(s);
}

std::string utilization_text(const gpu::device& d) {
  if (d.utilization < 0) return "-";
  return std::to_string(int(d.utilization * 100 + 0.5)) + "%";
}

json device_json(const std::string& backend, const gpu::device& d) {
  json heaps = json::array();
  for (const auto& h : d.heaps)
    heaps.push_back({{"size", h.size}, {"device_local", h.device_local}});
  return {{"backend", backend},
          {"index", d.index},
          {"name", d.name},
          {"vendor", d.vendor},
          {"type", gpu::device_type_name(d.type)},
          {"memory_bytes", d.memory_total},
          {"memory_free_bytes", d.memory_free},
          // null, not gpu::device's -1, where the backend does not say.
          {"utilization", d.utilization >= 0 ? json(d.utilization) : json(nullptr)},
          // The same card through two backends has the same one ("" unknown).
          {"uuid", d.uuid},
          {"heaps", heaps},
          {"subgroup_arithmetic", d.subgroup_arithmetic},
          {"compute_capability", d.compute_capability},
          {"detail", d.detail}};
}

int devices(const devices_options& o) {
  const gpu::registry& reg = gpu::device_registry();
  json backends = json::array();
  json devices = json::array();
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : reg.backends()) {
    const auto list = e.loaded ? e.devices() : std::vector<gpu::device>{};
    backends.push_back(
        {{"name", e.name}, {"loaded", e.loaded}, {"devices", list.size()}, {"reason", e.why}});
    if (e.kind == gpu::backend_kind::cpu) continue;  // --device names GPU backends' devices
    for (const auto& d : list) {
      devices.push_back(device_json(e.name, d));
      rows.push_back({e.name, std::to_string(d.index), d.name, or_dash(d.vendor),
                      gpu::device_type_name(d.type), format_bytes(d.memory_total),
                      d.memory_free > 0 ? format_bytes(d.memory_free) : "-", utilization_text(d),
                      or_dash(d.detail), heaps_text(d)});
    }
  }
  if (o.json) {
    print_json({{"backends", backends}, {"devices", devices}});
    return 0;
  }
  for (const std::string& line : gpu::registry_report(reg))
    std::fprintf(stderr, "backend %s\n", line.c_str());
  std::fprintf(stderr, "cpu kernels: %s\n", system_info_read().cpu_kernels.c_str());
  if (rows.empty()) {
    std::fprintf(stderr, "no CUDA or Vulkan devices\n");
    return 0;
  }
  print_table(
      {"BACKEND", "INDEX", "NAME", "VENDOR", "TYPE", "MEMORY", "FREE", "BUSY", "DETAIL", "HEAPS"},
      rows);
  return 0;
}

}  // namespace

action add_devices(CLI::App& app) {
  auto o = std::make_shared<devices_options>();
  CLI::App* cmd = app.add_subcommand(
      "devices",
      "List the CUDA and Vulkan devices models can run on (--backend B --device N), and which "
      "backend modules loaded");
  cmd->add_flag("--json", o->json, "{\"backends\": [...], \"devices\": [...]}");
  return [o] { return devices(*o); };
}

}  // namespace hearth::cli
