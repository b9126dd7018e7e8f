// get_metrics: the broker's counters and histograms (metrics.h) and the gauges read off its state
// when asked: queues, running jobs, nodes and their devices, the store, the peers, the messages
// by command. Names and units follow Prometheus's conventions (hearth-gateway renders them as its
// /metrics). This class keeps what only the metrics need (peers heard from lately, messages by
// command, the start time); the rest it is shown (metrics_sources) when a client asks.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/job-store.h"
#include "broker/live-job.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/turn-output.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// The state a get_metrics reply reads its gauges from.
struct metrics_sources {
  const std::map<std::string, job_queue>& queues;
  const std::unordered_map<uint64_t, live_job>& jobs;
  const node_registry& nodes;
  uint64_t unfinished_job_bytes = 0;  // prompts and messages of the unfinished jobs
  store_stats store;
  std::optional<size_t> connections;             // with auth: the ZAP handler's count
  std::map<std::string, size_t> transfers = {};  // model transfers not finished, by state
};

class metrics_report {
 public:
  explicit metrics_report(const broker_metrics& counters) : counters_(counters) {}

  void started(int64_t wall_ms) { started_ms_ = wall_ms; }
  // A message came from `rid` (hearth_broker_peers), and its command (or one that did not open).
  void note_peer(const std::string& rid);
  void received(wire::command cmd) { ++messages_received_[uint8_t(cmd)]; }
  void received_invalid() { ++messages_invalid_; }
  void sent(wire::command cmd) { ++messages_sent_[uint8_t(cmd)]; }
  // Forgets the peers not heard from lately (every tick).
  void prune_peers(net::steady::time_point now);
  // Whether `rid` was heard from lately (its connection is kept).
  bool heard_lately(const std::string& rid) const { return recent_peers_.contains(rid); }

  // The metrics_reply to `m`, capped to fit one message.
  void reply(turn_output& out, const std::string& rid, const wire::get_metrics& m,
             const metrics_sources& from) const;

 private:
  void append_state_metrics(std::vector<wire::metric_family>& out,
                            const metrics_sources& from) const;

  const broker_metrics& counters_;
  int64_t started_ms_ = 0;  // wall clock, for hearth_broker_start_time_seconds
  // Peers heard from lately (routing id -> when), pruned every tick: hearth_broker_peers.
  std::unordered_map<std::string, net::steady::time_point> recent_peers_;
  // Messages by command code, counted on the hot path without an allocation or a lookup;
  // received ones whose envelope did not open are `invalid`.
  std::array<uint64_t, 256> messages_received_{}, messages_sent_{};
  uint64_t messages_invalid_ = 0;
};

}  // namespace hearth::broker
