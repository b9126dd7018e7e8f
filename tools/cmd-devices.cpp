// hearth devices: the Vulkan devices models can run on (`--backend vulkan --device N`), with
// what the driver says of each: vendor, type, memory heaps and subgroup arithmetic.
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

// The discovered device of that name not yet matched (discovery and the backend both enumerate
// the loader's physical devices; names join them), or nullptr.
const gpu::device_info* discovered(const std::vector<gpu::device_info>& found,
                                   std::set<size_t>& used, const std::string& name) {
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].backend == "vulkan" && found[i].name == name && used.insert(i).second)
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
  const auto source = gpu::vulkan_source();
  const auto found = gpu::discover();
  std::set<size_t> used;
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  if (source.built) {
    for (const auto& d : source.devices()) {
      const gpu::device_info* info = discovered(found, used, d.name);
      out.push_back({{"index", d.index},
                     {"name", d.name},
                     {"vendor", d.vendor},
                     {"type", d.type},
                     {"memory_bytes", d.memory_bytes},
                     {"subgroup_arithmetic", d.subgroup_arithmetic},
                     {"heaps", heaps_json(info)}});
      rows.push_back({std::to_string(d.index), d.name, or_dash(d.vendor), d.type,
                      format_bytes(d.memory_bytes), d.subgroup_arithmetic ? "yes" : "no",
                      heaps_text(info)});
    }
  } else {
    // Without the backend nothing runs on these; discovery still shows what the machine has.
    std::fprintf(stderr,
                 "this build has no Vulkan backend (built without the Vulkan SDK and glslc); "
                 "models run on the CPU\n");
    for (const auto& d : found) {
      if (d.backend != "vulkan") continue;
      out.push_back({{"index", nullptr},
                     {"name", d.name},
                     {"vendor", d.vendor},
                     {"type", d.type},
                     {"memory_bytes", d.memory_total},
                     {"subgroup_arithmetic", nullptr},
                     {"heaps", heaps_json(&d)}});
      rows.push_back({"-", d.name, or_dash(d.vendor), d.type, format_bytes(d.memory_total), "-",
                      heaps_text(&d)});
    }
  }
  if (o.json) {
    print_json(out);
    return 0;
  }
  if (rows.empty()) {
    std::fprintf(stderr, "no Vulkan devices\n");
    return 0;
  }
  print_table({"INDEX", "NAME", "VENDOR", "TYPE", "MEMORY", "SUBGROUP ARITHMETIC", "HEAPS"}, rows);
  return 0;
}

}  // namespace

action add_devices(CLI::App& app) {
  auto o = std::make_shared<devices_options>();
  CLI::App* cmd = app.add_subcommand(
      "devices", "List the Vulkan devices models can run on (--backend vulkan --device N)");
  cmd->add_flag("--json", o->json, "A JSON array of devices");
  return [o] { return devices(*o); };
}

}  // namespace hearth::cli
