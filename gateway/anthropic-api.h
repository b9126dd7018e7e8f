// Anthropic's Messages API (POST /v1/messages), as Claude Code and Anthropic's SDKs speak it:
// `system`, messages of content blocks (text, tool_use, tool_result, thinking), tools with an
// input_schema, tool_choice, max_tokens, stop_sequences, sampling and `thinking` become a chat job
// like /v1/chat/completions' (gateway/chat-answer.h); the job's output becomes a message of
// content blocks (thinking, text, tool_use with its input as an object) with Anthropic's
// stop_reason and usage, whole or streamed as Anthropic's events (message_start, ping,
// content_block_start / _delta / _stop, message_delta, message_stop). Errors are in Anthropic's
// shape ({"type": "error", "error": {"type", "message"}}). The API key comes as `x-api-key` or as
// `Authorization: Bearer` (gateway.cpp reads both); `anthropic-version` is accepted and not
// needed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "gateway/chat-answer.h"
#include "gateway/openai-json.h"
#include "gateway/openai-request.h"

namespace hearth::gateway {

struct anthropic_request {
  // model, messages, params; request_id, watch, priority and api_key are the route's to set.
  wire::submit submit;
  bool stream = false;
};

// Parses and checks a request body: every field Anthropic defines is applied or refused with a
// 400 naming it ("messages[1].content[0].type", "max_tokens", "tools[0].type"); unknown fields
// are ignored.
std::variant<anthropic_request, request_refusal> parse_anthropic_request(std::string_view body);

// An error in OpenAI's shape (error_response) in Anthropic's: the same status, the body
// {"type": "error", "error": {"type", "message"}} with Anthropic's error types
// (invalid_request_error, authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error).
http_response anthropic_error(const http_response& openai_error);

// Anthropic's stop_reason for a finish reason ("stop", "length", "tool_calls") and the job's
// stop_reason: end_turn, stop_sequence, max_tokens, model_context_window_exceeded, tool_use.
std::string_view anthropic_stop_reason(std::string_view finish, std::string_view job_stop_reason);

// The message id of a job: "msg_<job id>".
std::string anthropic_message_id(uint64_t job_id);

// One /v1/messages request answered from its job.
class anthropic_answer final : public chat_answer {
 public:
  anthropic_answer(anthropic_request r, int64_t created, std::shared_ptr<responder> out);

 private:
  void opened() override;
  void item_began(size_t i) override;
  void item_grew(size_t i, std::string_view delta) override;
  void item_ended(size_t i) override;
  void completed(const wire::job_done& done, std::string_view finish) override;
  http_response error_reply(const http_response& openai_error) override;
  void error_events(const http_response& openai_error) override;

  // The message's head: id, type, role, model, then `content`, stop_reason, stop_sequence, usage.
  ojson message(ojson content, ojson stop_reason, ojson stop_sequence, ojson usage) const;

  // The one stop sequence asked for: the stop_sequence a stop at a stop string names ("" when
  // none or several, and so unknown).
  std::string stop_sequence_;
};

}  // namespace hearth::gateway
