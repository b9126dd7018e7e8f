// The broker's timers, run once per turn: liveness and heartbeats, quarantines that ended,
// recovered and stalled attempts, model transfers and auto_place (every half heartbeat interval),
// output flushes
// (output_flush_ms), queue positions (queue_position_ms) and a batch of pruning (every turn).
// Each calls the class that owns what it changes; the turn loop (broker.cpp) polls no longer
// than until next_due().
//
// Apart from the turn loop because the deadlines are state of their own, and so that "what
// happens every so often" is read in one place.
#pragma once

#include "broker/config.h"
#include "broker/job-history.h"
#include "broker/job-table.h"
#include "broker/metrics-report.h"
#include "broker/model-placement.h"
#include "broker/node-attempts.h"
#include "broker/node-registry.h"
#include "broker/storage-gate.h"
#include "broker/watch-relay.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class turn_timers {
 public:
  turn_timers(const broker_config& cfg, const storage_gate& storage, node_registry& nodes,
              job_table& jobs, node_attempts& attempts, watch_relay& relay, metrics_report& report,
              job_history& history, model_placement& placement)
      : cfg_(cfg),
        storage_(storage),
        nodes_(nodes),
        jobs_(jobs),
        attempts_(attempts),
        relay_(relay),
        report_(report),
        history_(history),
        placement_(placement) {}

  // The first heartbeat tick at once, the others after their interval.
  void start(net::steady::time_point now);
  // When the next timer is due (pruning aside, which the turn loop asks history about).
  net::steady::time_point next_due() const;
  // Runs the timers due at `now`.
  void run(net::steady::time_point now);

 private:
  const broker_config& cfg_;
  const storage_gate& storage_;
  node_registry& nodes_;
  job_table& jobs_;
  node_attempts& attempts_;
  watch_relay& relay_;
  metrics_report& report_;
  job_history& history_;
  model_placement& placement_;
  net::steady::time_point next_tick_{};
  net::steady::time_point next_flush_{};
  net::steady::time_point next_positions_{};
};

}  // namespace hearth::broker
