// The per-model queues of waiting jobs (job-queues.h).
#include "broker/job-queues.h"

namespace hearth::broker {

void job_queues::push(const live_job& j) {
  queues_[j.row.model].insert(key(j));
  ++n_queued_;
}

bool job_queues::erase(const live_job& j) {
  auto q = queues_.find(j.row.model);
  if (q == queues_.end()) return false;
  const bool erased = q->second.erase(key(j)) > 0;
  if (erased) --n_queued_;
  if (q->second.empty()) queues_.erase(q);
  return erased;
}

void job_queues::clear() {
  queues_.clear();
  n_queued_ = 0;
}

uint32_t job_queues::position(const live_job& j) const {
  auto q = queues_.find(j.row.model);
  if (q == queues_.end()) return 0;
  return uint32_t(q->second.order_of_key(key(j)));
}

}  // namespace hearth::broker
