// What each owner's unfinished jobs hold (jobs, prompt and message bytes), and all owners'
// together: the per-client and total bounds on unfinished jobs (client-sessions.cpp) read it.
//
// Its own state apart from the job table's state machine: a job is counted from its submit (or
// its load after a restart) until it leaves memory at the end of the turn that finished it, which
// is not a state change, so the table calls add() and release() at those two points only.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "broker/live-job.h"

namespace hearth::broker {

class owner_usage {
 public:
  // Counts `j` against its owner (and sets j.queued_bytes, what release() takes back).
  void add(live_job& j);
  void release(const live_job& j);
  void clear();

  client_usage of(const std::string& owner) const;
  uint64_t bytes() const { return bytes_; }  // of all unfinished jobs

 private:
  std::unordered_map<std::string, client_usage> by_owner_;
  uint64_t bytes_ = 0;
};

}  // namespace hearth::broker
