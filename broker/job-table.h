// The job table: the jobs the broker is responsible for now (queued or running), the per-model
// queues, what each owner's unfinished jobs hold, and the job state machine:
//
//   queued -> running -> completed | failed | cancelled, with running -> queued again when an
//   attempt is lost.
//
// Every change of a live job's state happens here (enqueue, assign, requeue, finish), and each
// writes the store in the turn's transaction: the turn loop (broker.cpp) commits before it sends
// what the turn queued, so a job's new state is durable before anyone hears of it. Jobs are
// handed to nodes here too (dispatch; which node gets one: node-match.h). The queues' order
// (job-queues.h) and the per-owner accounting (owner-usage.h) are their own small classes that
// only this table updates.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/config.h"
#include "broker/job-queues.h"
#include "broker/job-store.h"
#include "broker/live-job.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/owner-usage.h"
#include "broker/pipelines.h"
#include "broker/turn-output.h"
#include "broker/watch-relay.h"

namespace hearth::broker {

class job_table {
 public:
  using job_map = std::unordered_map<uint64_t, live_job>;

  // What the table writes to (the store, the turn's messages and job counts) and reads (the
  // nodes, for dispatch, and their running attempts, which it keeps in step).
  job_table(const broker_config& cfg, job_store& store, turn_output& out, watch_relay& relay,
            node_registry& nodes, metrics_turn& turn_metrics, pipeline_table& pipelines)
      : cfg_(cfg),
        store_(store),
        out_(out),
        relay_(relay),
        nodes_(nodes),
        turn_metrics_(turn_metrics),
        pipelines_(pipelines) {}

  job_map& jobs() { return jobs_; }
  const job_map& jobs() const { return jobs_; }
  live_job* find(uint64_t id);
  // Queued job ids per model, best first: priority (higher first), then age (lower id first).
  const std::map<std::string, job_queue>& queues() const { return queues_.by_model(); }
  size_t queued() const { return queues_.size(); }
  uint32_t queue_position(const live_job& j) const { return queues_.position(j); }
  // Prompt and message bytes of all unfinished jobs, and those of one owner's.
  uint64_t unfinished_bytes() const { return usage_.bytes(); }
  client_usage usage_of(const std::string& owner) const { return usage_.of(owner); }

  // A submitted job, already inserted in the store as `row` (with its id): counted and queued.
  live_job& add(job_row row);
  // Loads the unfinished jobs from the store: at start, and after a failed commit (clear()
  // first). Running ones wait one liveness period for their node to list them.
  void load();
  void clear();

  // Nodes with credit may get jobs: dispatch() runs at the end of the turn.
  void dispatch_later() { dispatch_needed_ = true; }
  bool dispatch_needed() const { return dispatch_needed_; }
  void dispatch();

  // The running attempt ended without finishing the job: queue it again, or fail it after
  // max_attempts (or finish it as cancelled when a cancel was pending). Every such end is on the
  // node side (a node that fails a job sends job_final failed, which finishes it), so the attempt
  // does not count towards max_attempts when another healthy node serves the model, nor ever
  // when it was handed back; max_total_attempts bounds the job in any case.
  // broker_restart: the attempt was lost because the broker restarted (its node did not come back
  // in time), which never counts towards max_attempts either.
  enum class loss { node, handback, broker_restart };
  void requeue(live_job& j, const std::string& why, loss cause = loss::node);
  void finish(live_job& j, wire::job_state state, const std::string& stop_reason,
              const std::string& error, uint32_t n_prompt, uint32_t n_gen);
  // The attempt of `j` on `n` is lost and the job queued again. An attempt that began before a
  // broker restart lost its tokens (or its job_assign) to the restart, not to its node: that loss
  // counts neither against the node nor against max_attempts.
  void attempt_lost(node_entry& n, live_job& j, const std::string& why);
  // Attempts that did not move on for too long are taken back (from the turn's timers).
  void attempt_timers(net::steady::time_point now);

  // Records an event in a live job's history that changes nothing of its state (auto_place's
  // "waiting for placement of MODEL on NODE").
  void note(uint64_t id, const std::string& event, const std::string& detail);

  // Writes what a job streamed since its last flush (append_output: only the new bytes).
  void flush_output(live_job& j);
  void flush_all();
  // Finished jobs leave memory at the end of the turn that finished them; a turn whose commit
  // failed keeps them (its reload reads them as they are stored).
  void erase_finished();
  void discard_finished() { finished_.clear(); }

 private:
  void enqueue(live_job& j);
  void assign(live_job& j, node_entry& n);

  const broker_config& cfg_;
  job_store& store_;
  turn_output& out_;
  watch_relay& relay_;
  node_registry& nodes_;
  metrics_turn& turn_metrics_;
  pipeline_table& pipelines_;  // a split model's jobs go to its last stage's node
  job_map jobs_;
  job_queues queues_;
  std::vector<uint64_t> finished_;  // jobs finished this turn, erased from jobs_ at its end
  // A job is counted against its owner from its submit (or load) until it leaves memory.
  owner_usage usage_;
  bool dispatch_needed_ = false;
};

}  // namespace hearth::broker
