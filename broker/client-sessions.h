// The client sessions: what clients (the CLI, the gateway) ask of the broker about jobs, acting
// as the identity the turn loop resolved (peer.h: its key, or the API key it presented).
//
// submit (validation, unknown models, and the bounds on each owner's unfinished jobs and on all
// of them, schema/PROTOCOL.md section 10.6), watch (the watch relay sends the rest), cancel,
// paged history queries (list_jobs, get_job) and prune_jobs, worked through a batch per turn
// together with the retention policy. Clients see and act on their own jobs; admins on all.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/allow-list.h"
#include "broker/api-key-service.h"
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

class client_sessions {
 public:
  // `auth`: with --auth, the allowed keys (whose certificate names show as job owners).
  client_sessions(const broker_config& cfg, job_store& store, turn_output& out,
                  const storage_gate& storage, job_table& jobs, node_registry& nodes,
                  watch_relay& relay, metrics_turn& turn_metrics, const api_key_service& api_keys,
                  const std::optional<allow_list>& auth)
      : cfg_(cfg),
        store_(store),
        out_(out),
        storage_(storage),
        jobs_(jobs),
        nodes_(nodes),
        relay_(relay),
        turn_metrics_(turn_metrics),
        api_keys_(api_keys),
        auth_(auth) {}

  void submit(const std::string& rid, const peer& who, wire::submit m);
  void watch(const std::string& rid, const peer& who, const wire::watch& m);
  void cancel(const std::string& rid, const peer& who, const wire::cancel& m);
  void list_jobs(const std::string& rid, const peer& who, const wire::list_jobs& m);
  void get_job(const std::string& rid, const peer& who, const wire::get_job& m);
  void prune(const std::string& rid, const wire::prune_jobs& m);

  // One bounded batch of the pending prune requests and of the retention policy (each turn while
  // the store takes writes), and whether more is to do without waiting for a timer.
  void prune_step(net::steady::time_point now);
  bool pruning() const { return !prunes_.empty() || retention_more_; }
  // The turn that worked on these requests failed to commit: their prunes are dropped (the turn
  // loop answers them storage_unavailable).
  void forget_prunes(const std::vector<std::pair<std::string, uint64_t>>& requests);

 private:
  // Makes `rid` a watcher of the job: its state now, then its output from what `has` says the
  // watcher already has (wire::watch's attempt, seq and output_offset), then its events.
  void watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has);
  // The job `job_id` if `who` may see and act on it: the live row, or the stored one read into
  // `stored`. nullptr after replying not_found or unauthorized.
  const job_row* visible_job(const std::string& rid, const peer& who, uint64_t request_id,
                             uint64_t job_id, std::optional<job_row>& stored);
  // How a job's owner is shown: the name of its key's certificate or API key, else the key itself.
  std::string owner_name(const std::string& owner_key) const;

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  const storage_gate& storage_;
  job_table& jobs_;
  node_registry& nodes_;
  watch_relay& relay_;
  metrics_turn& turn_metrics_;
  const api_key_service& api_keys_;
  const std::optional<allow_list>& auth_;
  // prune_jobs requests being worked through, a batch per turn, then answered.
  struct pending_prune {
    std::string routing_id;
    uint64_t request_id = 0;
    retention rule;
    uint64_t pruned = 0;
  };
  std::deque<pending_prune> prunes_;
  net::steady::time_point next_retention_{};
  bool retention_more_ = false;  // the last retention batch was full: another one next turn
};

}  // namespace hearth::broker
