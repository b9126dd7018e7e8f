#include "broker/config.h"

#include <yaml-cpp/yaml.h>

#include <set>

namespace hearth::broker {
namespace {

template <class T>
result<void> read_key(const YAML::Node& root, const char* key, T& out, const std::string& path) {
  const YAML::Node n = root[key];
  if (!n) return {};
  try {
    out = n.as<T>();
  } catch (const YAML::Exception&) {
    return error{path + ": '" + key + "' has the wrong type"};
  }
  return {};
}

}  // namespace

result<void> broker_config_load(const std::string& path, broker_config& cfg) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return error{"cannot read the config file " + path};
  } catch (const YAML::Exception& e) {
    return error{path + ": " + e.what()};
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) return error{path + ": expected a map of settings"};
  static const std::set<std::string> known = {
      "bind",         "db",        "heartbeat_ms",    "liveness",
      "max_attempts", "max_queue", "output_flush_ms", "queue_position_ms",
      "log_level"};
  for (const auto& kv : root) {
    const auto key = kv.first.as<std::string>();
    if (!known.contains(key)) return error{path + ": unknown setting '" + key + "'"};
  }
  for (auto r : {read_key(root, "bind", cfg.bind, path), read_key(root, "db", cfg.db, path),
                 read_key(root, "heartbeat_ms", cfg.heartbeat_ms, path),
                 read_key(root, "liveness", cfg.liveness, path),
                 read_key(root, "max_attempts", cfg.max_attempts, path),
                 read_key(root, "max_queue", cfg.max_queue, path),
                 read_key(root, "output_flush_ms", cfg.output_flush_ms, path),
                 read_key(root, "queue_position_ms", cfg.queue_position_ms, path),
                 read_key(root, "log_level", cfg.log_level, path)}) {
    if (!r) return r;
  }
  if (cfg.heartbeat_ms < 10 || cfg.heartbeat_ms > 600000) {
    return error{path + ": heartbeat_ms must be in [10, 600000]"};
  }
  if (cfg.liveness < 1 || cfg.liveness > 100) return error{path + ": liveness must be in [1, 100]"};
  if (cfg.max_attempts < 1) return error{path + ": max_attempts must be at least 1"};
  if (cfg.output_flush_ms < 1) return error{path + ": output_flush_ms must be at least 1"};
  static const std::set<std::string> levels = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
  if (!levels.contains(cfg.log_level)) {
    return error{path + ": log_level must be one of trace, debug, info, warn, error, off"};
  }
  return {};
}

}  // namespace hearth::broker
