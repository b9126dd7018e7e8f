// The watch relay: who follows which job, and what each watcher was sent of its output.
//
// A job's events and token chunks go to its watchers through deliver(). A watcher whose pipe is
// full is not queued every chunk: it lags, and catch_up() sends what it missed in pages of the
// job's output once it reads again (before job_done at the latest), within what its pipe and all
// peers together have room for (peer-outbox.h), so that a slow watcher of a fast stream costs its
// backlog once, in the job's output, not again in per-chunk messages. A watch that joins a
// running job, or a finished one, catches up the same way (from what the watcher says it has).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <zmq.hpp>

#include "broker/job-store.h"
#include "broker/live-job.h"
#include "broker/peer-outbox.h"
#include "broker/turn-output.h"
#include "schema/messages.h"

namespace hearth::broker {

// Bytes [offset, offset + max_bytes) of `text`, shortened to end on a UTF-8 character boundary
// (but holding at least one character when there is one), so that each page is valid UTF-8 when
// the whole is.
std::string_view utf8_page(std::string_view text, uint64_t offset, uint64_t max_bytes);
// Bytes read past a page of stored output, so that the page can end on a character boundary
// (a UTF-8 character has at most 4 bytes).
constexpr uint64_t k_utf8_lookahead = 4;

class watch_relay {
 public:
  using job_map = std::unordered_map<uint64_t, live_job>;

  watch_relay(job_store& store, turn_output& out, peer_outboxes& outboxes)
      : store_(store), out_(out), outboxes_(outboxes) {}

  // A job event to each of its watchers (deliver()).
  void notify(const live_job& j, wire::command cmd, const std::string& body);
  // job_queued to the watchers of each queued job whose position or waiting reason changed
  // (the queue-position timer); `waiting_reason(model)` says why the model's jobs wait.
  void queue_positions(const std::map<std::string, job_queue>& queues, job_map& jobs,
                       const std::function<std::string(const std::string&)>& waiting_reason);
  // A job event to one watcher. Token chunks to a watcher whose pipe is full are not queued: it
  // is marked lagging and catch_up() sends what it missed.
  void deliver(const live_job& j, const std::string& rid, wire::command cmd,
               const std::string& body);
  // `rid` watches the running job `j` and has its current attempt's output up to `from`: the
  // rest goes out in pages over the next turns, as to a watcher that lagged.
  void catch_up_running(const live_job& j, const std::string& rid, output_mark from);
  // `rid` watches the finished job `row` and has its output up to `from`: the rest is read from
  // the store in pages, then `done_body` (its job_done).
  void catch_up_finished(const job_row& row, const std::string& rid, output_mark from,
                         std::string done_body);
  // Sends the lagging watchers what their pipes have room for (each turn, after the commit).
  void catch_up(zmq::socket_t& router, const job_map& jobs);
  // Whether a watcher lags (the loop polls often while one does).
  bool empty() const { return lagging_.empty(); }
  // A dropped peer lags behind nothing any more.
  void forget_peer(const std::string& rid);
  // After the live jobs were reloaded: catch-ups of jobs, or attempts, that are gone end.
  void reloaded(const job_map& jobs);

 private:
  // An attempt's output from `from` on as job_tokens chunks of at most a page, up to about
  // max_bytes; the chunk that reaches the end of `output` brings the count to end_seq. Returns
  // what the watcher then has.
  output_mark send_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                               output_mark from, uint64_t end_seq, const std::string& output,
                               uint64_t max_bytes);
  // The same for a finished job, whose output is read from the store a page at a time.
  output_mark send_stored_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                      output_mark from, uint64_t end_seq, uint64_t total_bytes,
                                      uint64_t max_bytes);
  // The pages of `window`, bytes [base, base + window.size()) of an attempt's `total` bytes.
  output_mark send_output_window(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                 output_mark from, uint64_t end_seq, std::string_view window,
                                 uint64_t base, uint64_t total, uint64_t max_bytes);

  job_store& store_;
  turn_output& out_;
  peer_outboxes& outboxes_;
  // A watcher behind on a job's stream: what it has, and once the job finished, its output and
  // job_done, sent after the rest of the output.
  // Once the job has finished, the rest is read from the store (whose output is whole by then).
  struct watcher_lag {
    output_mark has;
    uint32_t attempt = 0;
    bool finished = false;
    uint64_t final_seq = 0;
    uint64_t final_bytes = 0;
    std::string done_body;
  };
  std::map<std::pair<uint64_t, std::string>, watcher_lag> lagging_;  // by (job, watcher)
};

}  // namespace hearth::broker
