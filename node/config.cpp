#include "node/config.h"
#include "schema/endpoint.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>

#include "backends/device.h"
#include "common/yaml-settings.h"
#include "store/manifest.h"

namespace hearth::node {

std::string node_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}
result<uint64_t> node_size_parse(const std::string& s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    if (v > (UINT64_MAX - 9) / 10) return error{"'" + s + "' is too large"};
    v = v * 10 + uint64_t(s[i++] - '0');
  }
  if (i == 0) return error{"'" + s + "' is not a size (e.g. 8GiB)"};
  while (i < s.size() && s[i] == ' ') ++i;
  const std::string unit = s.substr(i);
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "KiB" || unit == "K") {
    mult = uint64_t(1) << 10;
  } else if (unit == "MiB" || unit == "M") {
    mult = uint64_t(1) << 20;
  } else if (unit == "GiB" || unit == "G") {
    mult = uint64_t(1) << 30;
  } else if (unit == "TiB" || unit == "T") {
    mult = uint64_t(1) << 40;
  } else {
    return error{"'" + s + "' has an unknown unit (use B, KiB, MiB, GiB or TiB)"};
  }
  if (v > UINT64_MAX / mult) return error{"'" + s + "' is too large"};
  return v * mult;
}

namespace {

// A size setting ("8GiB", "50MiB", bytes), when the file has it.
result<void> size_setting(const YAML::Node& root, const char* key, uint64_t& out,
                          const std::string& path) {
  if (!root[key]) return {};
  std::string s;
  if (auto r = yaml_setting(root, key, s, path); !r) return r;
  auto v = node_size_parse(s);
  if (!v) return error{path + ": " + key + ": " + v.message()};
  out = *v;
  return {};
}

// A path from the YAML file at `yaml_path`: relative ones are relative to the file's folder, so
// the file means the same whatever the working directory of the daemon.
std::string path_beside(const std::string& yaml_path, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(yaml_path).parent_path() / p).lexically_normal().string();
}

}  // namespace

// Loads into a copy so that a bad file changes nothing.
result<void> node_config_load(const std::string& path, node_config& out) {
  auto root = yaml_settings_open(path, {"broker",
                                        "models",
                                        "name",
                                        "slots",
                                        "engine",
                                        "null_tokens_per_s",
                                        "memory_limit",
                                        "memory_budget",
                                        "threads",
                                        "ctx_per_slot",
                                        "backend",
                                        "device",
                                        "drain_timeout_ms",
                                        "models_rescan_ms",
                                        "hardware_refresh_ms",
                                        "log_level",
                                        "broker_key",
                                        "key",
                                        "store",
                                        "store_limit",
                                        "pinned",
                                        "transfer_port",
                                        "transfer_bind",
                                        "transfer_rate_limit",
                                        "transfer_max_copies",
                                        "stage_port",
                                        "stage_bind"});
  if (!root) return root.err();
  node_config cfg = out;
  for (auto r : {yaml_setting(*root, "broker", cfg.broker, path),
                 yaml_setting(*root, "models", cfg.models_dir, path),
                 yaml_setting(*root, "name", cfg.name, path),
                 yaml_setting(*root, "slots", cfg.slots, path),
                 yaml_setting(*root, "engine", cfg.engine, path),
                 yaml_setting(*root, "null_tokens_per_s", cfg.null_tokens_per_s, path),
                 yaml_setting(*root, "threads", cfg.threads, path),
                 yaml_setting(*root, "ctx_per_slot", cfg.ctx_per_slot, path),
                 yaml_setting(*root, "device", cfg.device, path),
                 yaml_setting(*root, "drain_timeout_ms", cfg.drain_timeout_ms, path),
                 yaml_setting(*root, "models_rescan_ms", cfg.models_rescan_ms, path),
                 yaml_setting(*root, "hardware_refresh_ms", cfg.hardware_refresh_ms, path),
                 yaml_setting(*root, "log_level", cfg.log_level, path),
                 yaml_setting(*root, "broker_key", cfg.broker_key, path),
                 yaml_setting(*root, "key", cfg.key, path),
                 yaml_setting(*root, "store", cfg.store, path),
                 yaml_setting(*root, "pinned", cfg.pinned, path),
                 yaml_setting(*root, "transfer_port", cfg.transfer_port, path),
                 yaml_setting(*root, "transfer_bind", cfg.transfer_bind, path),
                 yaml_setting(*root, "transfer_max_copies", cfg.transfer_max_copies, path),
                 yaml_setting(*root, "stage_port", cfg.stage_port, path),
                 yaml_setting(*root, "stage_bind", cfg.stage_bind, path)}) {
    if (!r) return r;
  }
  if ((*root)["broker_key"]) cfg.broker_key = path_beside(path, cfg.broker_key);
  if ((*root)["key"]) cfg.key = path_beside(path, cfg.key);
  if ((*root)["store"]) cfg.store = path_beside(path, cfg.store);
  if ((*root)["backend"]) {
    std::string name;
    if (auto r = yaml_setting(*root, "backend", name, path); !r) return r;
    auto kind = node_backend_parse(name);
    if (!kind) return error{path + ": " + kind.message()};
    cfg.backend = *kind;
  }
  if ((*root)["memory_limit"] && (*root)["memory_budget"]) {
    return error{path + ": memory_limit and memory_budget (its older name) are both set: keep one"};
  }
  for (auto r : {size_setting(*root, "memory_limit", cfg.memory_limit, path),
                 size_setting(*root, "memory_budget", cfg.memory_limit, path),
                 size_setting(*root, "store_limit", cfg.store_limit, path),
                 size_setting(*root, "transfer_rate_limit", cfg.transfer_rate_limit, path)}) {
    if (!r) return r;
  }
  if (auto r = node_config_check(cfg); !r) return error{path + ": " + r.message()};
  out = std::move(cfg);
  return {};
}

result<gpu::backend_kind> node_backend_parse(const std::string& name) {
  if (auto k = gpu::backend_kind_from_name(name)) return *k;
  return error{"backend must be cpu, cuda, vulkan or auto, got '" + name + "'"};
}

result<void> node_config_check(const node_config& cfg) {
  if (auto r = net::endpoint_check(cfg.broker); !r) return r;
  if (cfg.slots < 1 || cfg.slots > 256) return error{"slots must be in [1, 256]"};
  if (cfg.engine != "cpu" && cfg.engine != "null") return error{"engine must be cpu or null"};
  if (cfg.device < -1) return error{"device must be a device index, or -1 for the best"};
  if (cfg.threads < 0) return error{"threads must not be negative"};
  if (cfg.ctx_per_slot < 0) return error{"ctx_per_slot must not be negative"};
  if (cfg.transfer_port > 65535) return error{"transfer_port must be a TCP port, or 0 for none"};
  if (cfg.stage_port > 65535) return error{"stage_port must be a TCP port, or 0 for none"};
  for (const auto& name : cfg.pinned)
    if (!store::model_name_valid(name)) return error{"pinned: '" + name + "' is not a model name"};
  if (cfg.transfer_max_copies < 1) return error{"transfer_max_copies must be at least 1"};
  static const std::set<std::string> levels = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
  if (!levels.contains(cfg.log_level)) {
    return error{"log_level must be one of trace, debug, info, warn, error, off"};
  }
  if (cfg.broker_key.empty() != cfg.key.empty()) {
    return error{cfg.key.empty()
                     ? "broker_key is set but not key (this node's secret certificate, from "
                       "`hearth keygen`); give both or neither"
                     : "key is set but not broker_key (the broker's public certificate); give "
                       "both or neither"};
  }
  return {};
}

}  // namespace hearth::node
