#include "gateway/config.h"
#include "schema/endpoint.h"

#include <arpa/inet.h>

#include <charconv>
#include <filesystem>

#include "common/yaml-settings.h"
#include "gateway/batch-store.h"

namespace hearth::gateway {
namespace {

std::string path_beside(const std::string& yaml_path, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(yaml_path).parent_path() / p).lexically_normal().string();
}

// A duration in milliseconds from the file, at least `min`.
result<void> read_ms(const YAML::Node& root, const char* key, std::chrono::milliseconds& out,
                     uint64_t min, const std::string& path) {
  uint64_t ms = uint64_t(out.count());
  if (auto r = yaml_setting(root, key, ms, path); !r) return r;
  if (ms < min) return error{path + ": " + key + " must be at least " + std::to_string(min)};
  out = std::chrono::milliseconds(ms);
  return {};
}

}  // namespace

// Loads into a copy so that a bad file changes nothing.
result<void> gateway_config_load(const std::string& path, gateway_config& out) {
  auto root = yaml_settings_open(
      path, {"listen", "broker", "broker_key", "key", "insecure", "tls_cert", "tls_key", "cors",
             "db", "max_body_bytes", "max_upload_bytes", "max_total_body_bytes", "max_connections",
             "header_timeout_ms", "idle_timeout_ms", "write_timeout_ms", "max_unsent_bytes",
             "max_live_subscribers", "log_level"});
  if (!root) return root.err();
  gateway_config cfg = out;
  auto& o = cfg.options;
  for (auto r :
       {yaml_setting(*root, "listen", o.listen, path),
        yaml_setting(*root, "broker", o.broker, path),
        yaml_setting(*root, "broker_key", o.broker_key, path),
        yaml_setting(*root, "key", o.key, path), yaml_setting(*root, "insecure", o.insecure, path),
        yaml_setting(*root, "tls_cert", o.tls_cert, path),
        yaml_setting(*root, "tls_key", o.tls_key, path),
        yaml_setting(*root, "cors", o.cors_origins, path), yaml_setting(*root, "db", o.db, path),
        yaml_setting(*root, "max_body_bytes", o.max_body_bytes, path),
        yaml_setting(*root, "max_upload_bytes", o.max_upload_bytes, path),
        yaml_setting(*root, "max_total_body_bytes", o.max_total_body_bytes, path),
        yaml_setting(*root, "max_connections", o.max_connections, path),
        yaml_setting(*root, "max_unsent_bytes", o.max_unsent_bytes, path),
        yaml_setting(*root, "max_live_subscribers", o.max_live_subscribers, path),
        yaml_setting(*root, "log_level", cfg.log_level, path),
        read_ms(*root, "header_timeout_ms", o.header_timeout, 100, path),
        read_ms(*root, "idle_timeout_ms", o.idle_timeout, 100, path),
        read_ms(*root, "write_timeout_ms", o.write_timeout, 100, path)}) {
    if (!r) return r;
  }
  if (listen_host(o.listen).empty()) {
    return error{path + ": listen '" + o.listen + "': expected HOST:PORT, such as 127.0.0.1:8080"};
  }
  if (auto r = net::endpoint_check(o.broker); !r) return error{path + ": " + r.message()};
  if (o.max_body_bytes < 1024) return error{path + ": max_body_bytes must be at least 1024"};
  if (o.max_upload_bytes < o.max_body_bytes) {
    return error{path + ": max_upload_bytes must be at least max_body_bytes"};
  }
  if (o.max_upload_bytes > max_file_bytes) {
    return error{path + ": max_upload_bytes is " + std::to_string(o.max_upload_bytes) +
                 ", at most " + std::to_string(max_file_bytes) +
                 " (an uploaded file is kept as one SQLite value)"};
  }
  if (o.max_total_body_bytes < o.max_upload_bytes) {
    return error{path + ": max_total_body_bytes must be at least max_upload_bytes"};
  }
  if (o.max_connections < 1) return error{path + ": max_connections must be at least 1"};
  if (o.max_unsent_bytes < 65536) return error{path + ": max_unsent_bytes must be at least 65536"};
  if (o.max_live_subscribers < 1) {
    return error{path + ": max_live_subscribers must be at least 1"};
  }
  if (!log_level_valid(cfg.log_level)) {
    return error{path + ": log_level must be one of trace, debug, info, warn, error, off"};
  }
  for (auto* p : {&o.broker_key, &o.key, &o.tls_cert, &o.tls_key, &o.db}) {
    *p = path_beside(path, *p);
  }
  out = std::move(cfg);
  return {};
}

std::string listen_host(const std::string& listen) {
  std::string host, port;
  if (listen.starts_with('[')) {
    const auto close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      return {};
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos || listen.find(':') != colon) return {};
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return {};
  }
  return host;
}

bool listen_is_loopback(const std::string& listen) {
  const std::string host = listen_host(listen);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace hearth::gateway
