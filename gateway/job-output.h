// A job's output as every API answer reads it (OpenAI's chat and completions, the Responses API,
// Anthropic's messages): output events (schema/output-events.h) per choice, whether the job wrote
// events (api_params::events) or plain text, which reads as content events, a thinking model's
// think block split off as reasoning events when the job kept it in its text (show_thinking).
// One code path for every answer, streamed or whole.
//
//   job_output_reader  bytes of one attempt's output -> the events they complete
//   job_stream         a followed job's token events -> events new to the client (a restarted
//                      attempt repeats its bytes: the broker gives every attempt the same seed,
//                      so what the client already has is skipped) or, whole, the last attempt's
//   job_output         events gathered into choices (content, reasoning, tool calls, logprobs,
//                      finish), for a whole answer
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/think-filter.h"
#include "schema/messages.h"
#include "schema/output-events.h"

namespace hearth::gateway {

// The most choices an answer holds (api_params::n is checked to 1..8 before a job runs; an
// event naming a choice past this is the node's error).
inline constexpr uint32_t k_max_choices = 8;

// The length of the longest prefix of `s` that ends on a UTF-8 character boundary (a character
// cut at the end is left for the next piece; invalid bytes count as characters).
size_t utf8_whole_prefix(std::string_view s);

// How a job's output is to be read, from the job's parameters.
struct job_output_mode {
  bool events = false;           // params.api.events: JSON lines of output events
  bool split_reasoning = false;  // plain text with show_thinking: the think block is reasoning
};
job_output_mode job_output_mode_of(const wire::job_params& p);

// One attempt's output bytes, fed in pieces cut anywhere, as events.
class job_output_reader {
 public:
  explicit job_output_reader(job_output_mode mode);

  // The events the new bytes complete. Plain text: content (and reasoning) events for choice 0,
  // never a UTF-8 character cut (its start is held until it is whole). Events: an error when a
  // line is not an event or names a choice past k_max_choices; the reader is then spent.
  result<std::vector<wire::output_event>> feed(std::string_view bytes);
  // The end of the output: what was held back (a cut character, an unfinished tag), or an error
  // when an event line is unfinished.
  result<std::vector<wire::output_event>> finish();

 private:
  std::vector<wire::output_event> text_events(std::string_view text, bool flush);

  job_output_mode mode_;
  wire::output_event_reader events_;
  std::string error_;  // events: the first bad line's error, returned from then on
  std::string held_;   // plain text: the start of a character not yet whole
  std::optional<think_filter> think_;
};

// A followed job's output, attempt by attempt (job_tokens, job_restarted).
class job_stream {
 public:
  // `streaming`: events are handed out as they come, without repeats across attempts; else the
  // last attempt's output is kept and read whole at finish().
  job_stream(job_output_mode mode, bool streaming);

  // The events new to the client (streaming; none when whole).
  result<std::vector<wire::output_event>> tokens(const wire::job_tokens& t);
  // The broker restarted the job: its next attempt's stream starts again from the beginning.
  void restarted(uint32_t attempt);
  // The job completed: the events not handed out yet (whole: all of the last attempt's).
  result<std::vector<wire::output_event>> finish();

 private:
  void new_attempt(uint32_t attempt);

  job_output_mode mode_;
  bool streaming_;
  job_output_reader reader_;
  uint32_t attempt_ = 0;
  uint64_t attempt_bytes_ = 0;  // bytes the current attempt has produced
  uint64_t taken_bytes_ = 0;    // streaming: bytes handed to the reader (over all attempts)
  std::string text_;            // whole: the current attempt's bytes
};

// One choice of a whole answer (schema/output-events.h: the node's events gathered).
using choice_output = wire::choice_output;

// Events gathered into choices, by index (a choice that had no event is empty).
struct job_output {
  std::vector<choice_output> choices;
  void add(const wire::output_event& e);
  void add(const std::vector<wire::output_event>& events) {
    for (const auto& e : events) add(e);
  }
};

// A whole job's output, read at once: at least `n` choices (the request's n).
result<job_output> job_output_of(std::string_view output, job_output_mode mode, uint32_t n = 1);

// OpenAI's finish_reason of a choice: its finish event's, else "tool_calls" when it made calls,
// else the job's stop_reason's ("length" for max_tokens and context_full, else "stop").
std::string choice_finish_reason(const choice_output& c, std::string_view stop_reason);
std::string_view finish_reason_of_stop(std::string_view stop_reason);

}  // namespace hearth::gateway
