// A job's wire parameters as the generation they ask for, and their check: the one copy of
// wire::job_params into generation_params, and the rules of common/generation-params.h applied to
// a job by the CLI (hearth submit), the broker (at submit) and the node (at admission).
#pragma once

#include <string>

#include "common/generation-params.h"
#include "schema/messages.h"

namespace hearth::wire {

// The seed is copied as it is: the broker has replaced 0 ("choose one") by the time a node sees
// it. Presence and frequency penalties are OpenAI's (the sampler applies them within
// repeat_last_n, after repeat_penalty).
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

// generation_params_check of the job's parameters, and chat_template's shape (param
// "chat_template", code not_a_name): ok, or the parameter, its allowed range and the value given.
param_check job_params_check(const job_params& p);

}  // namespace hearth::wire
