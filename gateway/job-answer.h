// An answer to an HTTP request that became a job: what a route feeds it (the submit's outcome,
// the job's events in the broker's order, keep-alive ticks). OpenAI's chat and completions
// (openai_answer, openai-stream.h), the Responses API and Anthropic's messages each implement it
// and share submit_and_answer (openai-routes.h): submitting as the caller, following the job,
// keep-alives, and cancelling the job when the client goes away.
#pragma once

#include <cstdint>

#include "gateway/broker-link.h"

namespace hearth::gateway {

class job_answer {
 public:
  virtual ~job_answer() = default;
  // The broker accepted the submit as job `job_id`.
  virtual void accepted(uint64_t job_id) = 0;
  // The broker refused the submit or did not answer: the error goes to the client.
  virtual void refused(const link_failure& f) = 0;
  // One event of the job, in the broker's order. Returns true when the answer has ended.
  virtual bool event(const job_event& e) = 0;
  // Due every keep-alive period (streams only).
  virtual void keep_alive() = 0;
  virtual bool ended() const = 0;
  virtual uint64_t job_id() const = 0;
  virtual bool streaming() const = 0;
};

}  // namespace hearth::gateway
