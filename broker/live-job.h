// A job the broker is responsible for now (queued or running), the queues it waits in, and what
// its owner's unfinished jobs hold. Finished jobs live only in the store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/job-store.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// How far a watcher has an attempt's output: tokens [0, seq) and bytes [0, byte).
struct output_mark {
  uint64_t seq = 0;
  uint64_t byte = 0;
};

// A job the broker is responsible for now (queued or running). Finished jobs live only in the
// store.
struct live_job {
  job_row row;
  std::string output;     // the current attempt's text so far
  uint64_t next_seq = 0;  // the next token index expected from the current attempt
  // How much of `output` is in the store (append_output): bytes [0, stored_bytes).
  uint64_t stored_bytes = 0;
  // How much of the current attempt its watchers were sent. After a reload the node re-sends
  // what the store lacked; watchers get only the part beyond this.
  output_mark relayed;
  bool output_dirty = false;
  bool cancel_requested = false;
  // Attempts lost on the node side that do not count towards max_attempts (requeue()).
  uint32_t forgiven = 0;
  // After a restart: requeued if its node has not reported it by then.
  std::optional<net::steady::time_point> recovered_deadline;
  // The current attempt began before the broker restarted: a gap in its stream is the restart's
  // doing, not its node's.
  bool recovered_attempt = false;
  // The current attempt's stream lost tokens (or may have: its node said hello again) and the
  // node was asked to send it again from next_seq (job_resume, node-attempts.cpp).
  struct resume_state {
    bool outstanding = false;  // chunks past next_seq are ignored until one at next_seq comes
    bool gap = false;          // such a chunk came: the node has tokens the broker lacks
    uint32_t unanswered = 0;   // resumes sent since the stream last advanced
    net::steady::time_point sent{};
  } resume;
  std::set<std::string> watchers;  // routing ids of clients following it
  uint32_t last_position_sent = UINT32_MAX;
  std::string last_waiting_sent;  // job_queued.waiting last sent to its watchers
  uint64_t queued_bytes = 0;      // its prompt and messages, as counted against the limits
  // For the metrics: when it was last queued (its wait ends at assignment), and whether its
  // first token came (time to first token is observed once per job).
  net::steady::time_point queued_at{};
  bool first_token_seen = false;
  // The current attempt: when it was assigned (its node's measured rate), whether its node said
  // job_started, and when its node last moved it on (assigned, started, tokens, listed in a
  // hello). An attempt that does not move for attempt_start_timeout_ms (before job_started) or
  // attempt_stall_timeout_ms (after) is taken back (job_table::attempt_timers).
  net::steady::time_point assigned_at{};
  bool attempt_started = false;
  net::steady::time_point attempt_progress{};
};

// The bytes a job's prompt, messages (their tool calls too) and api params' texts hold, as the
// per-client and queue limits count them: tools, a JSON Schema and a grammar may each be larger
// than the prompt.
uint64_t request_bytes(const std::string& prompt, const std::vector<wire::chat_message>& messages,
                       const wire::job_params& params);

// The slots a job's attempt takes on its node: one per choice (api.n).
inline uint32_t choices_of(const wire::job_params& p) {
  return uint32_t(std::max(p.api.n, 1));
}

// What one owner's unfinished jobs hold (the per-client limits).
struct client_usage {
  uint32_t jobs = 0;
  uint64_t bytes = 0;
};

// Queued jobs of one model, best first: (-priority, id). An order-statistics tree, so a job's
// queue position is O(log n) even with a hundred thousand jobs waiting.
using job_queue =
    __gnu_pbds::tree<std::pair<int64_t, uint64_t>, __gnu_pbds::null_type, std::less<>,
                     __gnu_pbds::rb_tree_tag, __gnu_pbds::tree_order_statistics_node_update>;

}  // namespace hearth::broker
