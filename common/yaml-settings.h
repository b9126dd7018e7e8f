// Reading a YAML settings file the way every hearth daemon does: a map whose keys must all be
// known, each value read into a typed setting, every problem an error naming the file and key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "common/result.h"

namespace hearth {

// Parses `path` as a map of settings (an empty file is an empty map). Unknown keys are errors:
// a misspelt setting must not be silently ignored.
inline result<YAML::Node> yaml_settings_open(const std::string& path,
                                             const std::set<std::string>& known) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return error{"cannot read the config file " + path};
  } catch (const YAML::Exception& e) {
    return error{path + ": " + e.what()};
  }
  if (root.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return error{path + ": expected a map of settings"};
  for (const auto& kv : root) {
    const auto key = kv.first.as<std::string>();
    if (!known.contains(key)) return error{path + ": unknown setting '" + key + "'"};
  }
  return root;
}

// Reads root[key] into `out` when present.
template <class T>
result<void> yaml_setting(const YAML::Node& root, const char* key, T& out,
                          const std::string& path) {
  const YAML::Node n = root[key];
  if (!n) return {};
  try {
    out = n.as<T>();
  } catch (const YAML::Exception&) {
    return error{path + ": '" + key + "' has the wrong type"};
  }
  return {};
}

inline bool log_level_valid(const std::string& level) {
  static const std::set<std::string> levels = {"trace", "debug",    "info", "warn",
                                               "error", "critical", "off"};
  return levels.contains(level);
}

}  // namespace hearth
