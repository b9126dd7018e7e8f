// One batch on its way: its lines become jobs (priority batch_job_priority, request_key
// "batch:<batch id>:<line>", the caller's API key) submitted in a bounded window, each job
// followed to its end and its result recorded in the store at once; when every line has
// finished, the output and error files are written and the batch completes (or, cancelled,
// ends as cancelled). The one place that changes a running batch's state.
//
// Everything it does is on the gateway's I/O thread; the store is written before anything
// depends on it, so a gateway restarted at any point resumes from the store: lines without a job
// are submitted again (their request_key makes that safe), the others followed again.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "gateway/batch-store.h"
#include "gateway/gateway.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

// Lines of one batch whose job is being submitted or is unfinished, at most: enough to keep a
// homelab's slots busy, few enough that a 50,000-line batch does not flood the broker.
inline constexpr uint32_t batch_window = 64;

class batch_run : public std::enable_shared_from_this<batch_run> {
 public:
  // `on_final` runs once the batch reached a final state (the service drops the run).
  batch_run(gateway_services& s, batch_store& store, batch_row b, std::function<void()> on_final);
  ~batch_run();  // stops following its jobs (they go on in the broker)
  // Moves a validating batch to in_progress, loads the unfinished lines and starts on them.
  void start();
  // Cancels: lines without a job fail at once, unfinished jobs are cancelled; finished lines
  // keep their output. The batch is cancelled when the last job has ended.
  void cancel();
  const batch_row& row() const { return b_; }

 private:
  // A line without a job yet (pending_), or whose job is being submitted or followed (flights_).
  struct flight {
    std::string custom_id;  // for its size in the output file
    std::string body;
    openai_request request;
    uint64_t job_id = 0;  // 0 until accepted
    uint64_t follower = 0;
    uint32_t attempt = 0;
    std::string text;  // the output of `attempt` so far
    uint32_t refollows = 0;
  };

  // Runs `f`; when the store fails under it (disk full, I/O error), drops what is in memory and
  // starts again from the store a few seconds later.
  void guarded(const std::function<void()>& f);
  void restart();
  void unfollow_all();
  void pump();
  void submit(uint32_t index);
  void on_accepted(uint32_t index, const link_result<wire::accepted>& r);
  void follow(uint32_t index);
  void on_event(uint32_t index, const job_event& e);
  void on_lost(uint32_t index, const link_failure& f);
  // Records the line's end. A response that would take the output file past
  // max_batch_output_bytes, or an error body longer than the error file has room for per line,
  // is recorded as a shorter error instead.
  void finish_line(uint32_t index, line_state state, int32_t status_code, std::string result);
  void cancel_job(uint32_t index);
  void retry_later();
  void maybe_finalize();
  void finalize();
  std::string request_key(uint32_t index) const;

  gateway_services& s_;
  batch_store& store_;
  batch_row b_;
  std::function<void()> on_final_;
  openai_endpoint endpoint_ = openai_endpoint::chat_completions;
  std::deque<std::pair<uint32_t, flight>> pending_;  // line, its custom_id and body: no job yet
  std::map<uint32_t, flight> flights_;               // submitting or followed
  uint64_t output_bytes_ = 0;    // of the output file, from the lines completed so far
  uint32_t retry_delay_ms_ = 0;  // grows while the broker says "later", back to 0 on success
  bool retry_scheduled_ = false;
  bool finalized_ = false;
};

}  // namespace hearth::gateway
