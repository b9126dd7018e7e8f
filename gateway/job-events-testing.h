// For the tests of the answers a route feeds a job's events (openai-stream_test.cpp,
// chat-answer-testing.h): the events as the broker sends them.
#pragma once

#include <cstdint>
#include <string>

#include "schema/messages.h"

namespace hearth::gateway::testing {

// Job `job_id`'s output: attempt `attempt`'s `seq`th piece, one token of `text`.
inline wire::job_tokens job_tokens_of(uint64_t job_id, uint32_t attempt, uint64_t seq,
                                      std::string text) {
  wire::job_tokens t;
  t.job_id = job_id;
  t.attempt = attempt;
  t.seq = seq;
  t.n_tokens = 1;
  t.text = std::move(text);
  return t;
}

// Job `job_id` completed at its first attempt, stopped for `stop_reason`, with its token counts.
inline wire::job_done job_completed(uint64_t job_id, const char* stop_reason, uint32_t n_prompt,
                                    uint32_t n_gen) {
  wire::job_done d;
  d.job_id = job_id;
  d.attempt = 1;
  d.state = wire::job_state::completed;
  d.stop_reason = stop_reason;
  d.n_prompt = n_prompt;
  d.n_gen = n_gen;
  return d;
}

}  // namespace hearth::gateway::testing
