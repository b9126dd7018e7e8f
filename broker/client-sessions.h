// The client sessions: what clients (the CLI, the gateway) ask of the broker about live jobs,
// acting as the identity the turn loop resolved (peer.h: its key, or the API key it presented).
//
// submit (validation, unknown models, and the bounds on each owner's unfinished jobs and on all
// of them, schema/PROTOCOL.md section 10.6), watch (the watch relay sends the rest) and cancel.
// The history (list_jobs, get_job, prune_jobs) is job-history.h's. Clients see and act on their
// own jobs; admins on all.
//
// Clients' unfinished jobs are bounded: per owner (the client's identity) at most
// max_client_queued_jobs jobs and max_client_queued_bytes of prompts and messages, and
// max_queue_bytes over all owners. A job counts from its submit until it finishes, running
// included, because its row (prompt, messages and the output so far) stays in memory until then.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/config.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/peer.h"
#include "broker/storage-gate.h"
#include "broker/turn-output.h"
#include "broker/watch-relay.h"

namespace hearth::broker {

// The job `job_id` if `who` may see and act on it: the live row, or the stored one read into
// `stored`. nullptr after replying not_found or unauthorized.
const job_row* visible_job(turn_output& out, job_table& jobs, job_store& store,
                           const std::string& rid, const peer& who, uint64_t request_id,
                           uint64_t job_id, std::optional<job_row>& stored);

class client_sessions {
 public:
  client_sessions(const broker_config& cfg, job_store& store, turn_output& out,
                  const storage_gate& storage, job_table& jobs, node_registry& nodes,
                  watch_relay& relay, metrics_turn& turn_metrics)
      : cfg_(cfg),
        store_(store),
        out_(out),
        storage_(storage),
        jobs_(jobs),
        nodes_(nodes),
        relay_(relay),
        turn_metrics_(turn_metrics) {}

  void submit(const std::string& rid, const peer& who, wire::submit m);
  void watch(const std::string& rid, const peer& who, const wire::watch& m);
  void cancel(const std::string& rid, const peer& who, const wire::cancel& m);

 private:
  // Makes `rid` a watcher of the job: its state now, then its output from what `has` says the
  // watcher already has (wire::watch's attempt, seq and output_offset), then its events.
  void watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has);

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  const storage_gate& storage_;
  job_table& jobs_;
  node_registry& nodes_;
  watch_relay& relay_;
  metrics_turn& turn_metrics_;
};

}  // namespace hearth::broker
