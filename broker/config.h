// The broker's settings: flags for the essentials, a YAML file for the rest. Every setting has a
// default, so `hearth-broker` runs with no file at all.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace hearth::broker {

struct broker_config {
  std::string bind = "tcp://127.0.0.1:5555";
  std::string db = "hearth.db";
  uint32_t heartbeat_ms = 1000;      // interval of heartbeats to nodes
  uint32_t liveness = 3;             // missed intervals before a node is declared dead
  uint32_t max_attempts = 3;         // attempts of one job before it fails
  uint32_t max_queue = 100000;       // queued jobs at most; submit beyond gets queue_full
  uint32_t output_flush_ms = 250;    // how often streamed output is written to the database
  uint32_t queue_position_ms = 200;  // how often waiting clients hear their queue position
  // What one peer or client may hold of the broker's memory (broker.h says how each is used).
  uint64_t max_peer_outbox_bytes = 8 << 20;      // unsent messages to one peer; beyond: dropped
  uint32_t peer_stall_ms = 10000;                // a peer blocked this long is dropped
  uint64_t max_outbox_bytes = 256 << 20;         // unsent messages to all peers together
  uint32_t max_client_queued_jobs = 10000;       // unfinished jobs of one client (owner)
  uint64_t max_client_queued_bytes = 256 << 20;  // their prompts and messages, bytes
  uint64_t max_queue_bytes = uint64_t(1) << 30;  // prompts and messages of all unfinished jobs
  std::string log_level = "info";                // trace, debug, info, warn, error, off
};

// Reads the YAML file into `cfg` (keys not in the file keep their values). Unknown keys, wrong
// types and out-of-range values are errors naming the key and the file.
result<void> broker_config_load(const std::string& path, broker_config& cfg);

}  // namespace hearth::broker
