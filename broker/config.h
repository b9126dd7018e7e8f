// The broker's settings: flags for the essentials, a YAML file for the rest. Every setting has a
// default, so `hearth-broker` runs with no file at all.
#pragma once

#include <cstdint>
#include <string>

#include "broker/job-store.h"
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
  // "full": a reply goes out only after the turn's commit is fsync'd (survives a power cut);
  // "normal": synced at checkpoints only (survives a crash of the broker process; a power cut may
  // lose the last acknowledged jobs). PROTOCOL.md section 12.
  std::string durability = "full";
  // One job's output at most; a job whose output would pass it ends failed (output_too_large).
  uint64_t max_output_bytes = 64 << 20;
  // Finished jobs deleted from the history (retention: {max_age_days, keep_last}); 0 = keep.
  uint32_t retention_max_age_days = 0;
  uint64_t retention_keep_last = 0;

  // Bounds on what one node can claim (schema/PROTOCOL.md section 9.7). A node's credit and running
  // attempts never exceed min(its declared slots, max_node_slots).
  uint32_t max_node_slots = 64;
  // A node that loses quarantine_after attempts (it died, went silent, reconnected without them,
  // broke their stream, handed them back) within quarantine_window_ms gets no jobs for
  // quarantine_ms, doubled on each repeat within 10 minutes of the last, up to 10 minutes.
  uint32_t quarantine_after = 3;
  uint32_t quarantine_window_ms = 60000;
  uint32_t quarantine_ms = 60000;
  static constexpr uint32_t max_quarantine_ms = 600000;
  // Node records at most (online or not, in [1, 4096]: a list of them must fit a reply); a
  // node_hello for a new name beyond it gets limit_reached.
  uint32_t max_nodes = 256;
  // With auth: node records of one node key at most (names it registered), so that one key cannot
  // take them all.
  uint32_t max_nodes_per_key = 16;
  // An attempt its node has not started (job_started) this long after the job_assign, or whose
  // node sent nothing of it (a token) for attempt_stall_timeout_ms after, is taken back: cancelled,
  // queued again and counted as lost by the node. Generous: a large model's load and a long
  // prompt come before job_started.
  uint32_t attempt_start_timeout_ms = 600000;
  uint32_t attempt_stall_timeout_ms = 600000;
  // node_hello rate limits (token buckets): per connection, and over all connections together.
  uint32_t hello_rate_per_peer = 5;  // hellos per second
  uint32_t hello_burst_per_peer = 10;
  uint32_t hello_rate = 50;
  uint32_t hello_burst = 100;
  std::string log_level = "info";  // trace, debug, info, warn, error, off
  // The folder of keys (broker/allow-list.h): CURVE on the socket and only its keys may connect.
  // Without it the broker serves anyone who reaches it, so it refuses to bind anything but
  // loopback unless `insecure` says that is what is wanted.
  std::string auth;
  bool insecure = false;
  // With auth: authenticated connections from one address at most; keys beyond are refused at
  // the handshake (admin keys are let in anyway). Unfinished handshakes do not count.
  uint32_t max_connections_per_address = 256;
  // What one peer or client may hold of the broker's memory (broker.h says how each is used).
  // max_peer_outbox_bytes also bounds the bytes a peer's ZeroMQ pipe holds (peer-outbox.h).
  uint64_t max_peer_outbox_bytes = 8 << 20;      // unsent messages to one peer; beyond: dropped
  uint32_t peer_stall_ms = 10000;                // a peer blocked this long is dropped
  uint64_t max_outbox_bytes = 256 << 20;         // outboxes and pipes of all peers together
  uint32_t max_client_queued_jobs = 10000;       // unfinished jobs of one client (owner)
  uint64_t max_client_queued_bytes = 256 << 20;  // their prompts and messages, bytes
  uint64_t max_queue_bytes = uint64_t(1) << 30;  // prompts and messages of all unfinished jobs
  // Models (schema/PROTOCOL.md section 16): transfers running onto one node, and in all, at most;
  // auto_place: a job for a model no online node can run now, while an online node holds it, is
  // queued while the broker copies the model onto the best-fitting node (model-placement.h).
  uint32_t max_transfers_per_node = 2;
  uint32_t max_transfers = 64;
  bool auto_place = false;
  // Pipelines (PROTOCOL.md 17): how a split model's stages send the hidden states: f32 (exact:
  // the split computes what one node computes), f16 or q8_0 (half and about a quarter of the
  // bytes, at the error engine/io/hidden-state.h measures).
  std::string pipeline_hidden_type = "f32";
};

// The job store's options these settings ask for.
store_options broker_store_options(const broker_config& cfg);
// The retention policy of the settings.
retention broker_retention(const broker_config& cfg);

// Reads the YAML file into `cfg` (keys not in the file keep their values). Unknown keys, wrong
// types and out-of-range values are errors naming the key and the file.
result<void> broker_config_load(const std::string& path, broker_config& cfg);

// Secure by default: an error unless the broker has auth, binds loopback only, or was told
// `insecure` explicitly.
result<void> broker_config_check_exposure(const broker_config& cfg);

}  // namespace hearth::broker
