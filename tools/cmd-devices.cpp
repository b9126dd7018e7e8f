// hearth devices: the devices models can run on (`--backend cuda|vulkan --device N`), CUDA's then
// Vulkan's, with what the driver says of each: vendor, type, memory (free memory on CUDA),
// compute capability (CUDA), memory heaps and subgroup arithmetic (Vulkan).
#include <cstdio>
#include <set>

#include "gpu/discovery.h"
#include "gpu/select.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct devices_options {
  bool json = false;
};

// The discovered device of that backend and name not yet matched (discovery and the backends
// both enumerate the driver's devices; names join them), or nullptr.
const gpu::device_info* discovered(const std::vector<gpu::device_info>& found,
                                   std::set<size_t>& used, const std::string& backend,
                                   const std::string& name) {
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].backend == backend && found[i].name == name && used.insert(i).second)
      return &found[i];
  }
  return nullptr;
}

std::string heaps_text(const gpu::device_info* d) {
  if (!d) return "-";
  std::string s;
  for (const auto& h : d->heaps)
    s += (s.empty() ? "" : ", ") + format_bytes(h.size) + (h.device_local ? " local" : " host");
  return or_dash(s);
}

json heaps_json(const gpu::device_info* d) {
  json a = json::array();
  if (!d) return a;
  for (const auto& h : d->heaps) a.push_back({{"size", h.size}, {"device_local", h.device_local}});
  return a;
}

int devices(const devices_options& o) {
  const auto found = gpu::discover();
  std::set<size_t> used;
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (const gpu::device_backend_source& source : {gpu::cuda_source(), gpu::vulkan_source()}) {
    const bool vulkan = source.name == "vulkan";
    if (source.built) {
      for (const auto& d : source.devices()) {
        const gpu::device_info* info = discovered(found, used, source.name, d.name);
        json j = {{"backend", source.name},   {"index", d.index}, {"name", d.name},
                  {"vendor", d.vendor},       {"type", d.type},   {"memory_bytes", d.memory_bytes},
                  {"heaps", heaps_json(info)}};
        if (vulkan) j["subgroup_arithmetic"] = d.subgroup_arithmetic;
        if (!vulkan) {
          j["memory_free_bytes"] = d.memory_free;
          j["compute_capability"] = info ? info->compute_capability : "";
        }
        out.push_back(j);
        const std::string detail =
            vulkan ? std::string("subgroup arithmetic ") + (d.subgroup_arithmetic ? "yes" : "no")
                   : d.detail;
        rows.push_back({source.name, std::to_string(d.index), d.name, or_dash(d.vendor), d.type,
                        format_bytes(d.memory_bytes),
                        d.memory_free > 0 ? format_bytes(d.memory_free) : "-", or_dash(detail),
                        heaps_text(info)});
      }
      continue;
    }
    // Without the backend nothing runs on these; discovery still shows what the machine has.
    std::fprintf(stderr, "this build has no %s backend; models cannot run on %s devices\n",
                 source.title.c_str(), source.title.c_str());
    for (const auto& d : found) {
      if (d.backend != source.name) continue;
      out.push_back({{"backend", source.name},
                     {"index", nullptr},
                     {"name", d.name},
                     {"vendor", d.vendor},
                     {"type", d.type},
                     {"memory_bytes", d.memory_total},
                     {"subgroup_arithmetic", nullptr},
                     {"heaps", heaps_json(&d)}});
      rows.push_back({source.name, "-", d.name, or_dash(d.vendor), d.type,
                      format_bytes(d.memory_total), "-", "-", heaps_text(&d)});
    }
  }
  if (o.json) {
    print_json(out);
    return 0;
  }
  if (rows.empty()) {
    std::fprintf(stderr, "no CUDA or Vulkan devices\n");
    return 0;
  }
  print_table({"BACKEND", "INDEX", "NAME", "VENDOR", "TYPE", "MEMORY", "FREE", "DETAIL", "HEAPS"},
              rows);
  return 0;
}

}  // namespace

action add_devices(CLI::App& app) {
  auto o = std::make_shared<devices_options>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the CUDA and Vulkan devices models can run on (--backend B --device N)");
  cmd->add_flag("--json", o->json, "A JSON array of devices");
  return [o] { return devices(*o); };
}

}  // namespace hearth::cli
