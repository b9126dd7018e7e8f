// OpenAI's Responses API (POST /v1/responses), stateless: a request's input items (messages,
// function calls and their outputs, reasoning), instructions, function tools, tool_choice and
// text.format become a chat job like /v1/chat/completions' (gateway/chat-answer.h), and the job's
// output becomes a response object — reasoning, message and function_call output items, usage —
// whole, or streamed as the Responses API's typed events (response.created ... response.completed,
// each with its sequence_number). Nothing is stored for later: `previous_response_id`,
// `conversation` and `background` are refused with a 400 naming them; `store` is accepted and
// has no effect (the job is in hearth's history as every job is).
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

struct responses_request {
  // model, messages, params; request_id, watch, priority and api_key are the route's to set.
  wire::submit submit;
  bool stream = false;
  // What the response object repeats of the request: instructions, max_output_tokens,
  // parallel_tool_calls, temperature, text, tool_choice, tools, top_p, metadata (OpenAI's
  // defaults where the request gave none).
  ojson echo;
};

// Parses and checks a request body: every field the Responses API defines is applied or refused
// with a 400 naming it ("input[2].content[0].type", "tools[0].type", "previous_response_id");
// unknown fields are ignored, as OpenAI does.
std::variant<responses_request, request_refusal> parse_responses_request(std::string_view body);

// The response id of a job: "resp_<job id>".
std::string responses_id(uint64_t job_id);

// One /v1/responses request answered from its job.
class responses_answer final : public chat_answer {
 public:
  responses_answer(responses_request r, int64_t created, std::shared_ptr<responder> out);

 private:
  void opened() override;
  void item_began(size_t i) override;
  void item_grew(size_t i, std::string_view delta) override;
  void item_ended(size_t i) override;
  void completed(const wire::job_done& done, std::string_view finish) override;
  void error_events(const http_response& openai_error) override;

  // The response object: `status` "in_progress", "completed", "incomplete" or "failed".
  ojson response(std::string_view status, const ojson& output, const ojson& usage) const;
  ojson output_item(size_t i, std::string_view status) const;
  // Sends a stream event of `type` with `fields`, numbered.
  void send(std::string_view type, ojson fields);

  ojson echo_;
  uint64_t sequence_ = 0;
};

}  // namespace hearth::gateway
