#include "broker/config.h"

#include <set>
#include <type_traits>

#include "broker/allow-list.h"
#include "common/yaml-settings.h"
#include "schema/messages.h"

namespace hearth::broker {

namespace {
// Every setting of the YAML file and the member it fills, written once: the loader accepts these
// names and no others, and reads each into its member.
template <class F>
void broker_settings(broker_config& c, F&& f) {
  f("bind", c.bind);
  f("db", c.db);
  f("heartbeat_ms", c.heartbeat_ms);
  f("liveness", c.liveness);
  f("max_attempts", c.max_attempts);
  f("max_queue", c.max_queue);
  f("output_flush_ms", c.output_flush_ms);
  f("queue_position_ms", c.queue_position_ms);
  f("durability", c.durability);
  f("max_output_bytes", c.max_output_bytes);
  f("retention", c);  // a map: max_age_days, keep_last (read_retention)
  f("log_level", c.log_level);
  f("auth", c.auth);
  f("insecure", c.insecure);
  f("max_connections_per_address", c.max_connections_per_address);
  f("max_node_slots", c.max_node_slots);
  f("quarantine_after", c.quarantine_after);
  f("quarantine_window_ms", c.quarantine_window_ms);
  f("quarantine_ms", c.quarantine_ms);
  f("max_nodes", c.max_nodes);
  f("max_nodes_per_key", c.max_nodes_per_key);
  f("attempt_start_timeout_ms", c.attempt_start_timeout_ms);
  f("attempt_stall_timeout_ms", c.attempt_stall_timeout_ms);
  f("hello_rate_per_peer", c.hello_rate_per_peer);
  f("hello_burst_per_peer", c.hello_burst_per_peer);
  f("hello_rate", c.hello_rate);
  f("hello_burst", c.hello_burst);
  f("max_peer_outbox_bytes", c.max_peer_outbox_bytes);
  f("peer_stall_ms", c.peer_stall_ms);
  f("max_outbox_bytes", c.max_outbox_bytes);
  f("max_client_queued_jobs", c.max_client_queued_jobs);
  f("max_client_queued_bytes", c.max_client_queued_bytes);
  f("max_queue_bytes", c.max_queue_bytes);
  f("max_transfers_per_node", c.max_transfers_per_node);
  f("max_transfers", c.max_transfers);
  f("auto_place", c.auto_place);
  f("pipeline_hidden_type", c.pipeline_hidden_type);
}
// `retention:` is a map of its own, checked key by key like the top level.
result<void> read_retention(const YAML::Node& root, broker_config& c, const std::string& path) {
  const YAML::Node n = root["retention"];
  if (!n || n.IsNull()) return {};
  if (!n.IsMap()) return error{path + ": 'retention' must be a map (max_age_days, keep_last)"};
  for (const auto& kv : n) {
    const auto key = kv.first.as<std::string>();
    if (key != "max_age_days" && key != "keep_last") {
      return error{path + ": unknown setting 'retention." + key +
                   "' (retention has max_age_days and keep_last)"};
    }
  }
  if (auto r = yaml_setting(n, "max_age_days", c.retention_max_age_days, path); !r) return r;
  return yaml_setting(n, "keep_last", c.retention_keep_last, path);
}

template <class T>
result<void> read_setting(const YAML::Node& root, const char* name, T& member,
                          const std::string& path) {
  if constexpr (std::is_same_v<T, broker_config>) {
    return read_retention(root, member, path);
  } else {
    return yaml_setting(root, name, member, path);
  }
}
}  // namespace

store_options broker_store_options(const broker_config& cfg) {
  store_options o;
  o.sync = cfg.durability == "normal" ? store_options::durability::normal
                                      : store_options::durability::full;
  return o;
}

retention broker_retention(const broker_config& cfg) {
  return {uint64_t(cfg.retention_max_age_days) * 24 * 3600 * 1000, cfg.retention_keep_last};
}

// Loads into a copy so that a bad file changes nothing.
result<void> broker_config_load(const std::string& path, broker_config& out) {
  broker_config cfg = out;
  std::set<std::string> known;
  broker_settings(cfg, [&](const char* name, auto&) { known.insert(name); });
  auto root = yaml_settings_open(path, known);
  if (!root) return root.err();
  result<void> read;
  broker_settings(cfg, [&](const char* name, auto& member) {
    if (read) read = read_setting(*root, name, member, path);
  });
  if (!read) return read;
  if (cfg.heartbeat_ms < 10 || cfg.heartbeat_ms > 600000) {
    return error{path + ": heartbeat_ms must be in [10, 600000]"};
  }
  if (cfg.liveness < 1 || cfg.liveness > 100) return error{path + ": liveness must be in [1, 100]"};
  if (cfg.pipeline_hidden_type != "f32" && cfg.pipeline_hidden_type != "f16" &&
      cfg.pipeline_hidden_type != "q8_0") {
    return error{path + ": pipeline_hidden_type must be f32, f16 or q8_0"};
  }
  if (cfg.max_attempts < 1) return error{path + ": max_attempts must be at least 1"};
  if (cfg.output_flush_ms < 1) return error{path + ": output_flush_ms must be at least 1"};
  if (cfg.queue_position_ms < 1) return error{path + ": queue_position_ms must be at least 1"};
  if (cfg.durability != "full" && cfg.durability != "normal") {
    return error{path + ": durability must be full or normal, not '" + cfg.durability + "'"};
  }
  if (cfg.max_output_bytes < 4096) return error{path + ": max_output_bytes must be at least 4096"};
  if (cfg.max_node_slots < 1) return error{path + ": max_node_slots must be at least 1"};
  if (cfg.quarantine_after < 1) return error{path + ": quarantine_after must be at least 1"};
  if (cfg.quarantine_window_ms < 1) {
    return error{path + ": quarantine_window_ms must be at least 1"};
  }
  if (cfg.quarantine_ms > broker_config::max_quarantine_ms) {
    return error{path + ": quarantine_ms must be in [0, 600000]"};
  }
  if (cfg.max_nodes < 1 || cfg.max_nodes > wire::max_array_items) {
    return error{path + ": max_nodes must be in [1, " + std::to_string(wire::max_array_items) +
                 "]"};
  }
  if (cfg.max_nodes_per_key < 1) return error{path + ": max_nodes_per_key must be at least 1"};
  for (auto [key, value] : {std::pair{"attempt_start_timeout_ms", cfg.attempt_start_timeout_ms},
                            {"attempt_stall_timeout_ms", cfg.attempt_stall_timeout_ms}}) {
    if (value < 100) return error{path + ": " + key + " must be at least 100"};
  }
  for (auto [key, value] : {std::pair{"hello_rate_per_peer", cfg.hello_rate_per_peer},
                            {"hello_burst_per_peer", cfg.hello_burst_per_peer},
                            {"hello_rate", cfg.hello_rate},
                            {"hello_burst", cfg.hello_burst}}) {
    if (value < 1) return error{path + ": " + key + " must be at least 1"};
  }
  // A peer must be able to hold at least one largest message in its outbox.
  if (cfg.max_peer_outbox_bytes < uint64_t(wire::max_message_bytes)) {
    return error{path + ": max_peer_outbox_bytes must be at least " +
                 std::to_string(wire::max_message_bytes) + " (one largest message)"};
  }
  if (cfg.max_outbox_bytes < cfg.max_peer_outbox_bytes) {
    return error{path + ": max_outbox_bytes must be at least max_peer_outbox_bytes"};
  }
  if (cfg.peer_stall_ms < 100) return error{path + ": peer_stall_ms must be at least 100"};
  if (cfg.max_transfers_per_node < 1 || cfg.max_transfers < 1) {
    return error{path + ": max_transfers_per_node and max_transfers must be at least 1"};
  }
  if (!log_level_valid(cfg.log_level)) {
    return error{path + ": log_level must be one of trace, debug, info, warn, error, off"};
  }
  out = std::move(cfg);
  return {};
}

result<void> broker_config_check_exposure(const broker_config& cfg) {
  if (!cfg.auth.empty() || cfg.insecure || endpoint_is_loopback(cfg.bind)) return {};
  return error{"refusing to serve " + cfg.bind +
               " without authentication: anyone who can reach it could submit, read every job "
               "and pose as a node; give --auth DIR (see `hearth keygen`), or --insecure if that "
               "is really wanted"};
}

}  // namespace hearth::broker
