// hearth-gateway's settings: flags for the essentials, a YAML file (deploy/gateway.example.yaml)
// for the rest, read the way every hearth daemon reads its file (common/yaml-settings.h).
#pragma once

#include <string>

#include "common/result.h"
#include "gateway/gateway.h"

namespace hearth::gateway {

struct gateway_config {
  gateway_options options;
  std::string log_level = "info";
};

// Reads the YAML file into `cfg` (keys not in the file keep their values). Unknown keys, wrong
// types and bad values are errors naming the key and the file. Relative paths (keys, TLS files,
// db) are relative to the file's folder.
result<void> gateway_config_load(const std::string& path, gateway_config& cfg);

// HOST of a listen address "HOST:PORT" or "[IPv6]:PORT"; "" when it does not parse (no port, a
// port that is not a number in [0, 65535]). listen_is_loopback (gateway.h) is defined beside it.
std::string listen_host(const std::string& listen);

}  // namespace hearth::gateway
