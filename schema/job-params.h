// A job's wire parameters as the generation they ask for, and their check: the one copy of
// wire::job_params into generation_params, and the rules of common/generation-params.h applied to
// a job by the CLI (hearth submit), the broker (at submit) and the node (at admission).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/generation-params.h"
#include "schema/messages.h"

namespace hearth::wire {

// The seed is copied as it is: the broker has replaced 0 ("choose one") by the time a node sees
// it. Presence and frequency penalties are OpenAI's (the sampler applies them within
// repeat_last_n, after repeat_penalty). api.logit_bias becomes the sampler's logit_bias.
generation_params generation_params_of(const job_params& p);

// The stop_reason of a failed job whose request was at fault (PROTOCOL.md section 10.2): no node
// could run it as asked, so it is final, and hearth-gateway answers it with HTTP 400.
// prompt_too_long: the prompt has more tokens than a slot of the model holds (the error says both
// numbers). invalid_request: an empty prompt, a prompt and messages both, chat messages the model
// cannot format (a role it does not know, no chat template), parameters out of range.
inline constexpr const char* stop_reason_prompt_too_long = "prompt_too_long";
inline constexpr const char* stop_reason_invalid_request = "invalid_request";
// The stop_reason of a failed attempt that neither the request nor the node's engine is at fault
// for: the model's file changed on disk under the node (rewritten or truncated) while the attempt
// ran. The broker takes it as a job_handback: the job runs again (here, once the node has read the
// file again, or elsewhere) without counting toward max_attempts.
inline constexpr const char* stop_reason_model_changed = "model_changed";

// The bounds of api_params (PROTOCOL.md section 7.1), which api_params_check enforces.
inline constexpr size_t api_max_text_bytes = 256 << 10;  // tools, json_schema, grammar, kwargs
inline constexpr size_t api_max_tools = 128;             // OpenAI's limit
inline constexpr size_t api_max_tool_name_bytes = 64;    // OpenAI's: a-z A-Z 0-9 _ -
inline constexpr int32_t api_max_n = 8;
inline constexpr int32_t api_max_top_logprobs = 20;  // OpenAI's
inline constexpr size_t api_max_logit_bias = 300;    // OpenAI's
inline constexpr float api_max_bias = 100;           // |bias|, OpenAI's

// What can be checked of `api` without the model: n, top_logprobs (only with logprobs),
// logit_bias (count, range, each token once), tool_choice's form (`required` and `function:NAME`
// only with tools), the sizes of the text fields, tools / json_schema / template_kwargs
// well-formed JSON of the right kind (an array of objects, an object, an object: json-shape.h),
// json_schema and grammar not both, and events on when tools, logprobs or n > 1 ask for them
// (a client that did not ask for events must not get JSON lines it cannot read). The param is the
// api_params field ("n", "tools", ...). What needs the model is the node's (a token past the
// vocabulary is ignored, as llama-server does): a grammar that does not compile, a named tool
// missing from `tools`, a template that cannot render the tools.
param_check api_params_check(const api_params& api);

// The most tokens one attempt of the job streams (job_tokens' seq + n_tokens, job_final's n_gen):
// max_tokens for each of its api.n choices (an events job counts every token each choice
// sampled, its end of generation included, and no choice samples more than max_tokens).
uint64_t job_params_max_stream_tokens(const job_params& p);

// generation_params_check of the job's parameters, chat_template's shape (param
// "chat_template", code not_a_name) and api_params_check: ok, or the parameter, its allowed
// range and the value given.
param_check job_params_check(const job_params& p);

}  // namespace hearth::wire
