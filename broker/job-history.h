// The job history: what clients ask about jobs past and present, a page at a time (list_jobs,
// get_job: a live job's row and output from memory, which runs ahead of the store's, a finished
// one's from the store), and prune_jobs, worked through a batch per turn together with the
// retention policy (broker_retention), so that a large history never stalls the broker.
// Clients see their own jobs; admins all.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "broker/allow-list.h"
#include "broker/api-key-service.h"
#include "broker/client-sessions.h"
#include "broker/config.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/node-registry.h"
#include "broker/peer.h"
#include "broker/storage-gate.h"
#include "broker/turn-output.h"

namespace hearth::broker {

class job_history {
 public:
  // `api_keys` and `auth` (with --auth, the allowed keys) name the jobs' owners.
  job_history(const broker_config& cfg, job_store& store, turn_output& out,
              const storage_gate& storage, job_table& jobs, const node_registry& nodes,
              const api_key_service& api_keys, const std::optional<allow_list>& auth)
      : cfg_(cfg),
        store_(store),
        out_(out),
        storage_(storage),
        jobs_(jobs),
        nodes_(nodes),
        api_keys_(api_keys),
        auth_(auth) {}

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
  // How a job's owner is shown: the name of its key's certificate or API key, else the key itself.
  std::string owner_name(const std::string& owner_key) const;

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  const storage_gate& storage_;
  job_table& jobs_;
  const node_registry& nodes_;
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
