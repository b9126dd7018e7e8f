// The per-model queues of waiting jobs, best first: priority (higher first), then age (lower id
// first), and how many wait in all.
//
// Apart from the job table so that the order is defined once (key()) and a job's position read
// the same way by dispatch, submit's reply and the queue-position timer. Only the job table's
// state machine pushes and erases (enqueue, assign, finish): a job is in a queue exactly while
// its state is queued.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "broker/live-job.h"

namespace hearth::broker {

class job_queues {
 public:
  // A job's place in its model's queue: (-priority, id), smaller first.
  static std::pair<int64_t, uint64_t> key(const live_job& j) {
    return {-int64_t(j.row.priority), j.row.id};
  }

  void push(const live_job& j);
  // Takes `j` out of its model's queue (a model's queue goes when empty). False when it was not
  // in it.
  bool erase(const live_job& j);
  void clear();

  // Jobs before `j` in its model's queue (0 when first, or not queued).
  uint32_t position(const live_job& j) const;
  size_t size() const { return n_queued_; }
  // Queued job ids per model, best first; no model with an empty queue.
  const std::map<std::string, job_queue>& by_model() const { return queues_; }

 private:
  std::map<std::string, job_queue> queues_;
  size_t n_queued_ = 0;
};

}  // namespace hearth::broker
