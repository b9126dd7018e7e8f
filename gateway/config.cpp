#include "gateway/config.h"
#include "schema/endpoint.h"

#include <arpa/inet.h>

#include <charconv>
#include <filesystem>
#include <set>
#include <type_traits>

#include "common/yaml-settings.h"
#include "gateway/batch-store.h"

namespace hearth::gateway {
namespace {

std::string path_beside(const std::string& yaml_path, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(yaml_path).parent_path() / p).lexically_normal().string();
}

// A duration in the file, in milliseconds: the member it fills and its least value.
struct ms_setting {
  std::chrono::milliseconds& out;
  uint64_t min;
};

// Every setting of the YAML file and the member it fills, written once: the loader accepts these
// names and no others, and reads each into its member.
template <class F>
void gateway_settings(gateway_config& cfg, F&& f) {
  auto& o = cfg.options;
  f("listen", o.listen);
  f("broker", o.broker);
  f("broker_key", o.broker_key);
  f("key", o.key);
  f("insecure", o.insecure);
  f("tls_cert", o.tls_cert);
  f("tls_key", o.tls_key);
  f("cors", o.cors_origins);
  f("allowed_hosts", o.allowed_hosts);
  f("db", o.db);
  f("max_body_bytes", o.max_body_bytes);
  f("max_upload_bytes", o.max_upload_bytes);
  f("max_batch_output_bytes", o.max_batch_output_bytes);
  f("max_total_body_bytes", o.max_total_body_bytes);
  f("max_connections", o.max_connections);
  f("max_connections_per_address", o.max_connections_per_address);
  f("max_unsent_bytes", o.max_unsent_bytes);
  f("max_live_subscribers", o.max_live_subscribers);
  f("log_level", cfg.log_level);
  f("header_timeout_ms", ms_setting{o.header_timeout, 100});
  f("headers_timeout_ms", ms_setting{o.headers_timeout, 100});
  f("idle_timeout_ms", ms_setting{o.idle_timeout, 100});
  f("write_timeout_ms", ms_setting{o.write_timeout, 100});
}

template <class T>
result<void> read_setting(const YAML::Node& root, const char* key, T&& member,
                          const std::string& path) {
  if constexpr (std::is_same_v<std::decay_t<T>, ms_setting>) {
    uint64_t ms = uint64_t(member.out.count());
    if (auto r = yaml_setting(root, key, ms, path); !r) return r;
    if (ms < member.min) {
      return error{path + ": " + key + " must be at least " + std::to_string(member.min)};
    }
    member.out = std::chrono::milliseconds(ms);
    return {};
  } else {
    return yaml_setting(root, key, member, path);
  }
}

}  // namespace

// Loads into a copy so that a bad file changes nothing.
result<void> gateway_config_load(const std::string& path, gateway_config& out) {
  gateway_config cfg = out;
  std::set<std::string> known;
  gateway_settings(cfg, [&](const char* name, auto&&) { known.insert(name); });
  auto root = yaml_settings_open(path, known);
  if (!root) return root.err();
  result<void> read;
  gateway_settings(cfg, [&](const char* name, auto&& member) {
    if (read) read = read_setting(*root, name, member, path);
  });
  if (!read) return read;
  auto& o = cfg.options;
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
  if (o.max_batch_output_bytes < 1 || o.max_batch_output_bytes > max_file_bytes) {
    return error{path + ": max_batch_output_bytes is " + std::to_string(o.max_batch_output_bytes) +
                 ", expected 1 to " + std::to_string(max_file_bytes) +
                 " (an output file is kept as one SQLite value)"};
  }
  if (o.max_total_body_bytes < o.max_upload_bytes) {
    return error{path + ": max_total_body_bytes must be at least max_upload_bytes"};
  }
  if (o.max_connections < 1) return error{path + ": max_connections must be at least 1"};
  if (o.max_connections_per_address < 1) {
    return error{path + ": max_connections_per_address must be at least 1"};
  }
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

bool keys_required(const gateway_options& o) {
  return !o.insecure && !listen_is_loopback(o.listen);
}

}  // namespace hearth::gateway
