// The node registry: every node the broker knows (online or not), by name and by connection.
// A node's registration (node_hello's checks and record, node_status), its credit (node_pull),
// its heartbeats and liveness (a node silent for `liveness` intervals is lost), the attempts it
// lost and its quarantine (the bookkeeping: node-quarantine.h), and the registry's records in the
// store all live here. Which of its nodes can take a model's jobs is node-match.h.
//
// Where a node's heartbeat goes: any message on a node's connection is a sign of life
// (broker.cpp handle() calls heard()); the heartbeat message itself carries nothing else. Twice
// per interval liveness() declares silent nodes lost, counts missed heartbeats and sends each
// online node a heartbeat when nothing else went to it.
//
// What happens to a lost node's jobs is the job table's business: offline() hands back the
// attempts the node held, and the caller requeues them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/config.h"
#include "broker/job-store.h"
#include "broker/metrics.h"
#include "broker/node-admission.h"
#include "broker/node-entry.h"
#include "broker/node-match.h"
#include "broker/node-quarantine.h"
#include "broker/peer.h"
#include "broker/turn-output.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class node_registry {
 public:
  node_registry(const broker_config& cfg, job_store& store, turn_output& out,
                broker_metrics& metrics)
      : cfg_(cfg), store_(store), out_(out), metrics_(metrics), admission_(cfg, out) {}

  // The records of the store (at start): every node offline until it says hello.
  void load();

  node_map& nodes() { return nodes_; }
  const node_map& nodes() const { return nodes_; }
  node_entry* find(const std::string& name);
  node_entry* by_routing_id(const std::string& rid);
  // Every model a node ever advertised (kept in the store too).
  const std::set<std::string>& known_models() const { return known_models_; }

  // node_hello up to its record: the rate limits, the checks (version, sizes, max_nodes, the
  // key's share, who owns the name, a second process), then the node is online on `rid`.
  // nullptr after refusing it (the peer is told why). Its running attempts are reconciled with
  // the jobs by the caller, which then calls welcome().
  node_entry* hello(const std::string& rid, const peer& who, wire::node_hello& m);
  // The end of a hello: no credit until node_pull, the record stored, node_welcome and then the
  // job_resume of the attempts it still runs.
  void welcome(node_entry& n, const std::vector<wire::job_resume>& resumes);
  // A message came on the node's connection: it is alive.
  void heard(node_entry& n);
  // node_pull: credit, within its free slots.
  void pull(node_entry& n, const wire::node_pull& m);
  // node_status: its models and hardware now. False when ignored (too large).
  bool status(node_entry& n, wire::node_status m);
  // The node is gone (silent, said bye, dropped, its key removed): offline, no credit, its
  // connection forgotten. Returns the attempts it held; the caller takes them back.
  std::set<uint64_t> offline(node_entry& n);
  // An attempt of `n` (job `job_id`'s attempt `attempt`) ended without finishing on the node
  // side: counted, and the node quarantined after too many (node-quarantine.h).
  void lost_attempt(node_entry& n, uint64_t job_id, uint32_t attempt, const std::string& why,
                    bool handback = false);

  // Admin requests about nodes (node-listing.h lists them). release() says whether the node is
  // free to get jobs again (false after not_found); forget() expects the caller to have refused
  // it while the store refuses writes.
  bool release(const std::string& rid, const wire::release_node& m);
  void forget(const std::string& rid, const wire::forget_node& m);

  // Which nodes can take a model's jobs (node-match.h).
  bool healthy_node_holds(const std::string& model) const {
    return hearth::broker::healthy_node_holds(nodes_, model);
  }
  bool healthy_node_serves(const std::string& model, const std::string& except) const {
    return hearth::broker::healthy_node_serves(nodes_, model, except);
  }
  std::string waiting_reason(const std::string& model, uint32_t slots_needed = 1) const {
    return hearth::broker::waiting_reason(nodes_, model, slots_needed);
  }
  uint32_t most_slots_serving(const std::string& model) const {
    return hearth::broker::most_slots_serving(nodes_, model);
  }
  bool chat_unformattable(const std::string& model) const {
    return hearth::broker::chat_unformattable(nodes_, model);
  }

  // Ends quarantines that are over (true when one did) and forgets idle hello rate limits.
  bool quarantine_timers(net::steady::time_point now);
  // Liveness, twice per heartbeat interval: a node silent for `liveness` intervals is lost
  // (`lost` is called with it and why), the others have their missed heartbeats counted, are
  // sent a heartbeat when nothing else went to them, and have last_seen stored every few
  // intervals (not while `storage_down`).
  void liveness(net::steady::time_point now, bool storage_down,
                const std::function<void(node_entry&, const std::string&)>& lost);
  // A message went to `rid` (a node is sent heartbeats only when nothing else went to it).
  void sent(const std::string& rid, net::steady::time_point now);
  // The online nodes' last_seen, written when the broker stops.
  void store_seen();
  // After a failed commit's reload: the attempts are read again, the credit is the free slots.
  void clear_running();
  void credit_free_slots();

 private:
  void store_node(const node_entry& n);
  // Counts the heartbeat intervals `n` has been silent for, each once.
  void count_missed_heartbeats(node_entry& n, net::steady::time_point now);

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  broker_metrics& metrics_;
  node_map nodes_;                                            // by name
  std::unordered_map<std::string, std::string> node_by_rid_;  // routing id -> name
  std::set<std::string> known_models_;
  node_admission admission_;  // node_hello's rate limits and checks
};

}  // namespace hearth::broker
