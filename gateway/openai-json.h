// OpenAI's response objects as JSON: the parts a whole response (openai-request.cpp) and a
// stream's chunks (openai-stream.cpp) share, and the chunks themselves. Objects keep OpenAI's
// field order (ordered_json), and text that is not valid UTF-8 is replaced, never thrown on.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/job-output.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

using ojson = nlohmann::ordered_json;

// The value as compact JSON text (invalid UTF-8 replaced by U+FFFD).
std::string json_text(const ojson& j);

// {"id", "object", "created", "model"} of a response (`chunk`: of a streamed chunk).
ojson openai_object_head(const openai_request& r, uint64_t job_id, int64_t created, bool chunk);

// {"prompt_tokens", "completion_tokens", "total_tokens"} of a finished job.
ojson openai_usage(const wire::job_done& done);

// {"id", "type": "function", "function": {"name", "arguments"}}: a call as a message carries it
// (a chunk's calls carry their "index" first).
ojson openai_tool_call_json(const wire::tool_call& c, std::optional<uint32_t> index = {});

// A choice's `logprobs`: chat's {"content": [{token, logprob, bytes, top_logprobs}], "refusal":
// null}; completions' {"tokens", "token_logprobs", "top_logprobs" ({token: logprob} each),
// "text_offset"}, where text_offset counts the choice's text bytes from `text_offset` on (the
// bytes of the choice's text before these tokens).
ojson openai_logprobs_json(openai_endpoint endpoint, const std::vector<wire::sampled_logprob>& p,
                           uint64_t text_offset = 0);

// One choice of a whole response: {"index", "message" | "text", "logprobs", "finish_reason"}.
// A chat message's content is null when the choice made tool calls and wrote no text, as
// OpenAI's is; its reasoning goes as `reasoning_content` only when the request asked for it.
ojson openai_choice_json(const openai_request& r, uint32_t index, const choice_output& c,
                         std::string_view stop_reason);

// What one chunk of a streamed answer says of one choice.
struct chunk_piece {
  uint32_t index = 0;
  bool role = false;  // the choice's first chunk (chat): delta.role "assistant"
  std::string content;
  std::string reasoning;  // delta.reasoning_content (chat)
  // delta.tool_calls (chat): each call whole, with its index among the choice's calls.
  std::vector<std::pair<uint32_t, wire::tool_call>> tool_calls;
  std::vector<wire::sampled_logprob> logprobs;
  uint64_t text_offset = 0;  // completions: the choice's text bytes before this chunk's
  std::optional<std::string> finish_reason;
  bool empty() const {
    return !role && content.empty() && reasoning.empty() && tool_calls.empty() &&
           logprobs.empty() && !finish_reason;
  }
};

// One chunk: the piece as the choice's delta (chat) or text (completions), "logprobs" null unless
// it carries some, finish_reason null unless given, and "usage": null when the client asked for
// usage (stream_options.include_usage; the last chunk then carries it).
std::string openai_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                         const chunk_piece& piece);

// The usage chunk sent last when asked for: no choices, the job's usage.
std::string openai_usage_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                               const wire::job_done& done);

}  // namespace hearth::gateway
