// An answer to an HTTP request that became a job: what a route feeds it (the submit's outcome,
// the job's events in the broker's order, keep-alive ticks). OpenAI's chat and completions
// (openai_answer, openai-stream.h), the Responses API and Anthropic's messages each implement it
// and share submit_and_answer (openai-routes.h): submitting as the caller, following the job,
// keep-alives, and cancelling the job when the client goes away. What every answer does with the
// events is here, once: each kind of event goes to its handler, a lost link or a refused submit
// is OpenAI's error for it (openai_link_error) handed to fail().
#pragma once

#include <cstdint>

#include "gateway/broker-link.h"
#include "gateway/http.h"

namespace hearth::gateway {

class job_answer {
 public:
  virtual ~job_answer() = default;
  // The broker accepted the submit as job `job_id`.
  virtual void accepted(uint64_t job_id) = 0;
  // The broker refused the submit or did not answer: the error goes to the client.
  void refused(const link_failure& f);
  // One event of the job, in the broker's order. Returns true when the answer has ended.
  bool event(const job_event& e);
  // Due every keep-alive period (streams only).
  virtual void keep_alive() = 0;
  virtual bool ended() const = 0;
  virtual uint64_t job_id() const = 0;
  virtual bool streaming() const = 0;

 protected:
  // The job wrote output.
  virtual void tokens(const wire::job_tokens& t) = 0;
  // The job's next attempt (failover) starts its output again from the beginning; it repeats
  // what the client has (the same seed), which the answer's job_stream skips.
  virtual void restarted(uint32_t attempt) = 0;
  // The job ended, completed or not.
  virtual void done(const wire::job_done& d) = 0;
  // The answer fails with `openai_error` (an error in OpenAI's shape), unless it has ended.
  virtual void fail(const http_response& openai_error) = 0;
};

}  // namespace hearth::gateway
