#include "broker/config.h"

#include "broker/allow-list.h"
#include "common/yaml-settings.h"
#include "schema/messages.h"

namespace hearth::broker {

// Loads into a copy so that a bad file changes nothing.
result<void> broker_config_load(const std::string& path, broker_config& out) {
  auto root = yaml_settings_open(path, {"bind",
                                        "db",
                                        "heartbeat_ms",
                                        "liveness",
                                        "max_attempts",
                                        "max_queue",
                                        "output_flush_ms",
                                        "queue_position_ms",
                                        "log_level",
                                        "auth",
                                        "insecure",
                                        "max_connections_per_address",
                                        "max_node_slots",
                                        "quarantine_after",
                                        "quarantine_window_ms",
                                        "quarantine_ms",
                                        "max_nodes",
                                        "hello_rate_per_peer",
                                        "hello_burst_per_peer",
                                        "hello_rate",
                                        "hello_burst",
                                        "max_peer_outbox_bytes",
                                        "peer_stall_ms",
                                        "max_outbox_bytes",
                                        "max_client_queued_jobs",
                                        "max_client_queued_bytes",
                                        "max_queue_bytes"});
  if (!root) return root.err();
  broker_config cfg = out;
  for (auto r :
       {yaml_setting(*root, "bind", cfg.bind, path),
        yaml_setting(*root, "db", cfg.db, path),
        yaml_setting(*root, "heartbeat_ms", cfg.heartbeat_ms, path),
        yaml_setting(*root, "liveness", cfg.liveness, path),
        yaml_setting(*root, "max_attempts", cfg.max_attempts, path),
        yaml_setting(*root, "max_queue", cfg.max_queue, path),
        yaml_setting(*root, "output_flush_ms", cfg.output_flush_ms, path),
        yaml_setting(*root, "queue_position_ms", cfg.queue_position_ms, path),
        yaml_setting(*root, "log_level", cfg.log_level, path),
        yaml_setting(*root, "auth", cfg.auth, path),
        yaml_setting(*root, "insecure", cfg.insecure, path),
        yaml_setting(*root, "max_connections_per_address", cfg.max_connections_per_address, path),
        yaml_setting(*root, "max_node_slots", cfg.max_node_slots, path),
        yaml_setting(*root, "quarantine_after", cfg.quarantine_after, path),
        yaml_setting(*root, "quarantine_window_ms", cfg.quarantine_window_ms, path),
        yaml_setting(*root, "quarantine_ms", cfg.quarantine_ms, path),
        yaml_setting(*root, "max_nodes", cfg.max_nodes, path),
        yaml_setting(*root, "hello_rate_per_peer", cfg.hello_rate_per_peer, path),
        yaml_setting(*root, "hello_burst_per_peer", cfg.hello_burst_per_peer, path),
        yaml_setting(*root, "hello_rate", cfg.hello_rate, path),
        yaml_setting(*root, "hello_burst", cfg.hello_burst, path),

        yaml_setting(*root, "max_peer_outbox_bytes", cfg.max_peer_outbox_bytes, path),
        yaml_setting(*root, "peer_stall_ms", cfg.peer_stall_ms, path),
        yaml_setting(*root, "max_outbox_bytes", cfg.max_outbox_bytes, path),
        yaml_setting(*root, "max_client_queued_jobs", cfg.max_client_queued_jobs, path),
        yaml_setting(*root, "max_client_queued_bytes", cfg.max_client_queued_bytes, path),
        yaml_setting(*root, "max_queue_bytes", cfg.max_queue_bytes, path)}) {
    if (!r) return r;
  }
  if (cfg.heartbeat_ms < 10 || cfg.heartbeat_ms > 600000) {
    return error{path + ": heartbeat_ms must be in [10, 600000]"};
  }
  if (cfg.liveness < 1 || cfg.liveness > 100) return error{path + ": liveness must be in [1, 100]"};
  if (cfg.max_attempts < 1) return error{path + ": max_attempts must be at least 1"};
  if (cfg.output_flush_ms < 1) return error{path + ": output_flush_ms must be at least 1"};
  if (cfg.queue_position_ms < 1) return error{path + ": queue_position_ms must be at least 1"};
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
