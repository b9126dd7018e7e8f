// OpenAI's response objects as JSON: the parts a whole response (openai-request.cpp) and a
// stream's chunks (openai-stream.cpp) share, and the chunks themselves. Objects keep OpenAI's
// field order (ordered_json), and text that is not valid UTF-8 is replaced, never thrown on.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/openai-request.h"

namespace hearth::gateway {

using ojson = nlohmann::ordered_json;

// The value as compact JSON text (invalid UTF-8 replaced by U+FFFD).
std::string json_text(const ojson& j);

// {"id", "object", "created", "model"} of a response (`chunk`: of a streamed chunk).
ojson openai_object_head(const openai_request& r, uint64_t job_id, int64_t created, bool chunk);

// {"prompt_tokens", "completion_tokens", "total_tokens"} of a finished job.
ojson openai_usage(const wire::job_done& done);

// One chunk of a streamed answer: `text` as the choice's delta (chat: `delta.content`, with
// `delta.role` too when `first`), `finish_reason` null unless given, and "usage": null when the
// client asked for usage (stream_options.include_usage; the last chunk then carries it).
// `reasoning`, when not empty, goes as `delta.reasoning_content` (include_reasoning).
std::string openai_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                         std::string_view text, bool first,
                         std::optional<std::string_view> finish_reason,
                         std::string_view reasoning = {});

// The usage chunk sent last when asked for: no choices, the job's usage.
std::string openai_usage_chunk(const openai_request& r, uint64_t job_id, int64_t created,
                               const wire::job_done& done);

}  // namespace hearth::gateway
