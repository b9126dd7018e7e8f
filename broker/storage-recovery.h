// The live state loaded from the store: at start, and again after a turn whose commit failed
// (disk full, I/O error). Nothing of such a turn was kept, so nothing of it may be told: its
// messages are discarded, every client request of the turn is answered storage_unavailable, and
// the jobs and API keys are reloaded from the store (as after a restart, but with the nodes still
// connected: each is asked to resume its attempts from what was stored). What is not a record
// carries over the reload: the watchers (connections) and what they were sent.
#pragma once

#include <exception>

#include "broker/api-key-service.h"
#include "broker/job-history.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/metrics.h"
#include "broker/node-attempts.h"
#include "broker/node-registry.h"
#include "broker/storage-gate.h"
#include "broker/turn-output.h"
#include "broker/watch-relay.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class storage_recovery {
 public:
  storage_recovery(job_store& store, storage_gate& storage, turn_output& out, job_table& jobs,
                   node_registry& nodes, node_attempts& attempts, watch_relay& relay,
                   api_key_service& api_keys, job_history& history, metrics_turn& turn_metrics)
      : store_(store),
        storage_(storage),
        out_(out),
        jobs_(jobs),
        nodes_(nodes),
        attempts_(attempts),
        relay_(relay),
        api_keys_(api_keys),
        history_(history),
        turn_metrics_(turn_metrics) {}

  // Loads the nodes, API keys and unfinished jobs: at start.
  void load();
  // The turn's transaction failed: it is rolled back, writes are refused for a backoff, the
  // turn's messages are replaced by storage_unavailable answers, and the live state reloaded.
  void failed(const std::exception& e);
  // Whether the broker serves this turn: false while a reload that could not read the database
  // either waits for its retry (nothing is handled meanwhile; messages wait in ZeroMQ).
  bool serving(net::steady::time_point now);

 private:
  // Reloads the jobs and API keys, keeping the watchers and the connections; throws when the
  // store cannot be read.
  void reload();

  job_store& store_;
  storage_gate& storage_;
  turn_output& out_;
  job_table& jobs_;
  node_registry& nodes_;
  node_attempts& attempts_;
  watch_relay& relay_;
  api_key_service& api_keys_;
  job_history& history_;
  metrics_turn& turn_metrics_;
  bool reload_pending_ = false;
};

}  // namespace hearth::broker
