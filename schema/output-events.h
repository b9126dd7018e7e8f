// Output events: what a job's output holds when its request set api_params::events (issue 56):
// tool calls, reasoning kept apart from the answer, log-probabilities and several choices, in
// the one byte stream the broker stores, pages and resumes by byte offset, unchanged.
//
// The stream is JSON lines: one JSON object per event, each ended by "\n" (JSON escapes every
// newline inside a string, so a line is always one whole event). A reader may be handed the
// stream cut anywhere, even inside a UTF-8 character; it keeps the partial line until its end
// arrives. Every event names its choice (`i`, 0 when absent) and carries one of:
//
//   {"i":0,"content":"Hel"}                       answer text, in order
//   {"i":0,"reasoning":"The user wants"}          reasoning text (a think block, harmony analysis)
//   {"i":0,"tool_call":{"id":"call_1","name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}
//                                                 one whole call (arguments as JSON text)
//   {"i":0,"logprobs":[{"token":"Hel","bytes":[72,101,108],"logprob":-0.31,
//                       "top":[{"token":"Hel","bytes":[72,101,108],"logprob":-0.31}, ...]}]}
//                                                 sampled tokens' log-probabilities, in order
//   {"i":0,"finish":"stop"}                       the choice ended: "stop", "length", "tool_calls"
//
// PROTOCOL.md section 10.8 is this format for other implementations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "schema/message-parts.h"

namespace hearth::wire {

// One candidate token with its log-probability (natural log, before sampling: the model's
// distribution after logit_bias, as llama-server reports it).
struct token_logprob {
  std::string token;           // its text (may be part of a UTF-8 character: see bytes)
  std::vector<uint8_t> bytes;  // its exact bytes
  float logprob = 0;
};

struct sampled_logprob {
  token_logprob sampled;
  std::vector<token_logprob> top;  // the top_logprobs most likely, most likely first
};

enum class output_event_kind : uint8_t { content, reasoning, tool_call, logprobs, finish };

struct output_event {
  uint32_t choice = 0;
  output_event_kind kind = output_event_kind::content;
  std::string text;                    // content, reasoning; finish: its reason
  tool_call call;                      // tool_call
  std::vector<sampled_logprob> probs;  // logprobs
};

// The line of one event, "\n" included. Text that is not valid UTF-8 is written with U+FFFD in
// place of each bad byte (a content event is cut on character boundaries by its writer; a
// token's exact bytes travel in `bytes`).
std::string output_event_line(const output_event& e);

// The events of a stream fed in pieces.
class output_event_reader {
 public:
  // The most bytes one line may hold before the stream is called malformed.
  static constexpr size_t max_line_bytes = 4 << 20;

  // Appends `bytes` and returns the events whose lines are now complete, in order. A line that is
  // not an event (not JSON, an unknown shape, over max_line_bytes) is an error naming it; the
  // reader is then spent (every later call returns the same error).
  result<std::vector<output_event>> feed(std::string_view bytes);

  // Bytes of a line not yet ended.
  size_t pending() const { return partial_.size(); }

 private:
  std::string partial_;
  std::string error_;
};

// Every event of a whole stream; an unended last line is an error.
result<std::vector<output_event>> output_events_parse(std::string_view stream);

// One choice's events gathered, as a whole answer holds them.
struct choice_output {
  std::string content;    // its content events' text, in order
  std::string reasoning;  // its reasoning events' text, in order
  std::vector<tool_call> tool_calls;
  std::vector<sampled_logprob> logprobs;
  std::string finish;  // its finish event's reason ("stop", "length", "tool_calls"); "" when none
};

// Adds `e`, an event of the choice, to what the choice holds (a later finish replaces one before).
void choice_output_add(choice_output& c, const output_event& e);

}  // namespace hearth::wire
