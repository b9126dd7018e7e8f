// A node as the broker knows it: what it said (hello, node_status), its connection and liveness,
// its credit and running attempts, and what it did (losses, quarantine, measured rate), which
// chooses among nodes (job_table::dispatch). The registry (node-registry.h) keeps them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// A registration (node_hello, or node_status's model list) larger than this is refused: it bounds
// what one node adds to the broker's memory and to each nodes_reply and models_reply.
constexpr size_t k_max_registration_bytes = 1 << 20;

struct node_entry {
  std::string name;
  std::string key;         // its public key: the name belongs to this key ("" without auth)
  std::string routing_id;  // "" while offline
  std::string hostname;
  std::string engine;
  uint32_t slots = 0;           // min(declared slots, max_node_slots)
  uint32_t declared_slots = 0;  // what its last hello said
  uint32_t credit = 0;          // jobs it asked for and has not been sent yet
  wire::hardware_info hardware;
  std::vector<wire::model_info> models;
  std::vector<wire::skipped_model> skipped;  // files of its models directory it does not serve
  // Models flowing (model-placement.h): the address its connection comes from (ZeroMQ's
  // Peer-Address; "" over inproc or ipc), where peers fetch its blobs (hello's transfer_port, 0:
  // nowhere) with which CURVE key, and what its model store may still take (0: no store).
  std::string address;
  uint32_t transfer_port = 0;
  std::string transfer_key;
  uint32_t stage_port = 0;  // its stage socket (PROTOCOL.md 17.2; 0: it holds no stages)
  // The key it proves on other nodes' sockets (a transfer ticket's, a stage's neighbour's): the
  // one the broker authenticated it by; what it claims as transfer_key only without keys.
  const std::string& peer_key() const { return key.empty() ? transfer_key : key; }
  uint64_t store_capacity = 0;
  std::set<uint64_t> running;  // job ids assigned to it
  bool online = false;
  net::steady::time_point last_heard{};
  net::steady::time_point last_sent{};
  int64_t last_seen_ms = 0;               // wall clock, for the registry's last_seen column
  net::steady::time_point last_stored{};  // when last_seen_ms was last written

  // Attempts it lost (node_registry::lost_attempt): times of the recent ones, oldest
  // first, and the total since the broker started.
  std::deque<net::steady::time_point> recent_losses;
  uint32_t lost = 0;
  // The last k_losses_kept losses, newest last, for node_summary: which attempt, what happened.
  static constexpr size_t k_losses_kept = 8;
  std::deque<wire::node_loss> last_losses;
  // A random number of the node process (node_hello.instance; 0 from an older node): a hello with
  // another one for a live node's name comes from a second process, not a reconnect.
  uint64_t instance = 0;
  // Measured behaviour, which chooses among nodes (job_table::dispatch): attempts it
  // completed since the broker started, and their tokens per second from assignment to the
  // final (an average weighted towards the recent ones; 0 before the first).
  uint32_t completed = 0;
  double measured_rate = 0;
  // Quarantined: no jobs until quarantine_end. quarantine_ms doubles on each repeat (level).
  net::steady::time_point quarantine_end{};
  int64_t quarantined_until_ms = 0;  // the same as wall time, for node_summary
  uint32_t quarantine_level = 0;
  net::steady::time_point last_handback{};  // the latest hand-back counted as a loss

  // Heartbeat intervals of the current silence already counted as missed (the metrics).
  uint32_t missed_counted = 0;
  // Tokens it generated per second of the last k_rate_window_s seconds (steady seconds, count),
  // for its tokens-per-second gauge.
  static constexpr int k_rate_window_s = 10;
  std::deque<std::pair<int64_t, uint64_t>> recent_tokens;
  void count_tokens(net::steady::time_point now, uint64_t n);
  double tokens_per_second(net::steady::time_point now) const;

  bool quarantined(net::steady::time_point now) const { return now < quarantine_end; }
  // Losses at or after `since`.
  uint32_t losses_since(net::steady::time_point since) const;
  // Slots without a running attempt, and of those the ones it asked jobs for (its credit).
  uint32_t free_slots() const;
  uint32_t free_credit() const { return std::min(credit, free_slots()); }

  bool serves(const std::string& model) const;
  // What it offers for models: its memory limit, else all its memory (the node itself unloads
  // idle models to make room).
  uint64_t capacity() const {
    return hardware.memory_limit > 0 ? hardware.memory_limit : hardware.memory_total;
  }
  // It serves the model and can run it whole: what it says the model needs with its settings
  // (model_layout.whole_bytes; 0: not said) fits what it offers. A model none can hold alone
  // runs split (pipelines.h).
  bool can_hold(const std::string& model) const;
  bool has_loaded(const std::string& model) const;
  // Larger is faster: a GPU node before a CPU node, then more CPU threads. A claim: it only breaks
  // ties among nodes not measured yet.
  uint64_t speed_rank() const;
  // Counts a completed attempt of `n_gen` tokens that took `seconds` from assignment.
  void measure(uint32_t n_gen, double seconds);
  // As listed to clients and stored (running: attempts assigned to it now).
  wire::node_summary summary() const;
};

}  // namespace hearth::broker
