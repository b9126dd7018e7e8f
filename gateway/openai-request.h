// OpenAI's request and response bodies for /v1/chat/completions and /v1/completions, turned into
// a hearth job and back: the one place that knows which OpenAI parameter is which job parameter,
// used by the HTTP routes (openai-routes.cpp) and by batches (each line is such a request).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "gateway/broker-link.h"
#include "gateway/http.h"
#include "schema/messages.h"

namespace hearth::gateway {

struct job_output;  // gateway/job-output.h

enum class openai_endpoint { chat_completions, completions };

// "/v1/chat/completions" or "/v1/completions" -> the endpoint; nullopt otherwise.
std::optional<openai_endpoint> openai_endpoint_of(std::string_view url);

struct openai_request {
  openai_endpoint endpoint = openai_endpoint::chat_completions;
  // model, prompt (completions) or messages (chat), params; request_id, watch, priority,
  // request_key and api_key are the caller's to set.
  wire::submit submit;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // A thinking model's reasoning returned as `reasoning_content` (chat only; hearth's
  // `include_reasoning`, as OpenRouter names it): the job's reasoning events, or, for a plain-text
  // job, its think block (submit.params.show_thinking) split off with common/think-filter.h.
  // Without it a job's reasoning events are left out of the answer.
  bool include_reasoning = false;
  std::string user;
};

// A request the gateway refuses, as OpenAI reports it: status 400 and the parameter.
struct request_refusal {
  int status = 400;
  std::string message;
  std::string param;
  std::string code;
};

// Parses and checks a request body (JSON). Every parameter OpenAI defines for the endpoint is
// either applied or refused with a clear message naming it (unknown roles, wrong types,
// out-of-range values, what hearth cannot do: audio, echo, best_of); unknown fields are ignored
// as OpenAI does. tools, tool_choice, response_format, grammar, logprobs, n and logit_bias go
// to submit.params.api, whose `events` is set when the answer needs more than text (tools,
// logprobs, n > 1).
std::variant<openai_request, request_refusal> parse_openai_request(openai_endpoint endpoint,
                                                                   std::string_view body);

// A job's parameters with OpenAI's defaults where hearth's CLI has others (the top of
// openai-request.cpp says which and why): every HTTP API's starting point.
wire::job_params openai_default_params();

// The parts of a request that other APIs (gateway/responses-api.cpp, anthropic-api.cpp) share,
// each the value for api_params or the refusal naming `param`:
// OpenAI's chat `tools` ([{"type": "function", "function": {"name", "description",
// "parameters", "strict"}}]) checked, as api_params::tools ("" for none); their names into
// `names` when given.
std::variant<std::string, request_refusal> openai_tools_text(const nlohmann::json& tools,
                                                             const std::string& param,
                                                             std::vector<std::string>* names);
// `tool_choice` ("auto", "none", "required", {"type": "function", "function": {"name"}}) as
// api_params::tool_choice, a named one checked against the tools' names ("" without tools).
std::variant<std::string, request_refusal> openai_tool_choice(
    const nlohmann::json& v, const std::string& param, const std::vector<std::string>& names);
// `response_format` as api_params::json_schema: "" for text, {"type":"object"} for json_object
// (or its "schema", as llama.cpp's server takes), json_schema's "schema" ("{}" when absent).
std::variant<std::string, request_refusal> openai_response_format_schema(const nlohmann::json& f,
                                                                         const std::string& param);

// OpenAI's finish_reason for a job's stop_reason: "stop" or "length".
std::string_view openai_finish_reason(std::string_view stop_reason);

// The response id of a job: "chatcmpl-<job id>" / "cmpl-<job id>".
std::string openai_response_id(openai_endpoint endpoint, uint64_t job_id);

// The whole (non-streamed) response for a job that completed with `output` (its last attempt's
// bytes: text, or output events): 200 with every choice, or a 500 when the output is not the
// events it should be.
http_response openai_response(const openai_request& r, uint64_t job_id, int64_t created,
                              std::string_view output, const wire::job_done& done);
// The same of the output read into choices already (a stream's job_stream).
http_response openai_response(const openai_request& r, uint64_t job_id, int64_t created,
                              const job_output& out, const wire::job_done& done);
// Its body (batches store it as the line's response).
std::string openai_response_body(const openai_request& r, uint64_t job_id, int64_t created,
                                 std::string_view output, const wire::job_done& done);

// The HTTP error for a job that did not complete (failed: 400 when the request was at fault,
// e.g. a prompt longer than the model's context, else 500; cancelled: 499-like 500), and for a
// broker refusal or a missing reply (404 unknown model naming the known ones, 429 queue or
// limit, 401, 503 no reply / storage unavailable).
http_response openai_job_error(const wire::job_done& done);
http_response openai_link_error(const link_failure& f);
// The 503 for a request the broker got no word of (`f.no_reply`): it did not answer, or it
// refused this gateway's key (then the message says so alone).
http_response broker_unavailable(const link_failure& f);

// Deeper JSON than any request needs is refused before it is turned into values.
inline constexpr int k_max_json_depth = 64;
// `text` as JSON, parsed only while it nests at most k_max_json_depth levels (a recursive value
// deeper than that is never built); else what is wrong with it ("is not valid JSON", ...).
result<nlohmann::json> json_parse_bounded(std::string_view text);
// A request body as JSON: an object within the depth bound, else the reason ("the body ...");
// every API's parser starts here.
result<nlohmann::json> request_body_json(std::string_view body);

// What a JSON value is, in a message's words: "a string", "an integer", ... (the gateway's
// refusals of every API say it alike).
std::string json_kind_text(const nlohmann::json& v);

}  // namespace hearth::gateway
