#include "broker/config.h"

#include "common/yaml-settings.h"
#include "schema/messages.h"

namespace hearth::broker {

// Loads into a copy so that a bad file changes nothing.
result<void> broker_config_load(const std::string& path, broker_config& out) {
  auto root = yaml_settings_open(
      path,
      {"bind", "db", "heartbeat_ms", "liveness", "max_attempts", "max_queue", "output_flush_ms",
       "queue_position_ms", "log_level", "max_peer_outbox_bytes", "peer_stall_ms",
       "max_outbox_bytes", "max_client_queued_jobs", "max_client_queued_bytes", "max_queue_bytes"});
  if (!root) return root.err();
  broker_config cfg = out;
  for (auto r :
       {yaml_setting(*root, "bind", cfg.bind, path), yaml_setting(*root, "db", cfg.db, path),
        yaml_setting(*root, "heartbeat_ms", cfg.heartbeat_ms, path),
        yaml_setting(*root, "liveness", cfg.liveness, path),
        yaml_setting(*root, "max_attempts", cfg.max_attempts, path),
        yaml_setting(*root, "max_queue", cfg.max_queue, path),
        yaml_setting(*root, "output_flush_ms", cfg.output_flush_ms, path),
        yaml_setting(*root, "queue_position_ms", cfg.queue_position_ms, path),
        yaml_setting(*root, "log_level", cfg.log_level, path),
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

}  // namespace hearth::broker
