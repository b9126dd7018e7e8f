// What nodes say about the attempts they run: a hello's list of them (reconciled with the jobs:
// the node resumes the broker's, drops the others, and the broker takes back what the node no
// longer has), their stream (job_started, job_tokens relayed to the watchers, job_resume when
// tokens were lost), and their end (job_final, job_handback). A lost node's attempts are taken
// back here too. The job states themselves change only in the job table (job-table.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "broker/config.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/live-job.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/peer.h"
#include "broker/turn-output.h"
#include "broker/watch-relay.h"

namespace hearth::broker {

class node_attempts {
 public:
  node_attempts(const broker_config& cfg, job_store& store, turn_output& out, job_table& jobs,
                node_registry& nodes, watch_relay& relay, metrics_turn& turn_metrics)
      : cfg_(cfg),
        store_(store),
        out_(out),
        jobs_(jobs),
        nodes_(nodes),
        relay_(relay),
        turn_metrics_(turn_metrics) {}

  // node_hello: the registry's checks and record (node_registry::hello), then its attempts.
  void on_hello(const std::string& rid, const peer& who, wire::node_hello m);
  void on_started(node_entry& n, const wire::job_started& m);
  void on_tokens(node_entry& n, const wire::job_tokens& m, std::string_view body);
  void on_final(node_entry& n, const wire::job_final& m);
  void on_handback(node_entry& n, const wire::job_handback& m);
  // The node is gone (node_registry::offline); its attempts are lost and queued again.
  void node_lost(node_entry& n, const std::string& why);
  // From the turn's heartbeat timer: jobs recovered at start-up whose node did not list them
  // within one liveness period are queued again (the restart's doing, not the node's), and
  // outstanding resumes are sent again (resume_timer).
  void timers(net::steady::time_point now);

  // What the watchers of each job relayed to this turn had been sent before it: when the turn's
  // commit fails its messages are never sent, so the reload goes back to these marks.
  std::unordered_map<uint64_t, output_mark>& relayed_before_turn() { return relayed_before_turn_; }

 private:
  // Requeues the attempt `n` gave back (job_handback, or a final saying its model file changed).
  void handed_back(node_entry& n, live_job& j, const std::string& reason);
  // The current attempt's stream lost tokens: job_resume asks the node for them again; after
  // k_max_resumes unanswered ones the attempt is abandoned (abandon_stream).
  void resume_stream(node_entry& n, live_job& j, const std::string& why);
  // The stream cannot be completed: the attempt is cancelled and the job queued again.
  void abandon_stream(node_entry& n, live_job& j, const std::string& why);
  // An outstanding resume of a stream that still has a gap is sent again after k_resume_retry.
  void resume_timer(live_job& j, net::steady::time_point now);

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  job_table& jobs_;
  node_registry& nodes_;
  watch_relay& relay_;
  metrics_turn& turn_metrics_;
  std::unordered_map<uint64_t, output_mark> relayed_before_turn_;
};

}  // namespace hearth::broker
