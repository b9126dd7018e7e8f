// The OpenAI routes (POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /v1/models/{id}) and hearth's own history routes (GET /v1/hearth/jobs,
// GET /v1/hearth/jobs/{id}, POST /v1/hearth/jobs/{id}/cancel, GET /v1/hearth/nodes), each a
// client of the broker.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/gateway.h"
#include "gateway/job-answer.h"
#include "gateway/router.h"

namespace hearth::gateway {

void add_openai_routes(router& r, gateway_services& s);

// Submits `submit` as the caller (their API key, interactive priority) and feeds `answer` the
// outcome and the job's events to its end; a streaming answer gets keep_alive() every
// k_keep_alive; a client that goes away cancels the job (also when it leaves before the broker
// accepted it). The route has checked the request and the model.
void submit_and_answer(gateway_services& s, const std::shared_ptr<exchange>& ex,
                       wire::submit submit, std::shared_ptr<job_answer> answer);
void add_history_routes(router& r, gateway_services& s);

// A job id as hearth writes it (42) or as an OpenAI response names it (chatcmpl-42, cmpl-42);
// nullopt for anything else (0 included).
std::optional<uint64_t> parse_job_id(std::string_view s);
// The 400 for a job id that parse_job_id refused.
http_response bad_job_id(const std::string& id);
// The answer to a request about one job that the broker refused: another owner's job is a 404,
// as one that does not exist (the broker's unauthorized; the caller's key was checked just
// before), not a 401 that would tell the client its key is bad.
http_response job_link_error(const link_failure& f, uint64_t job_id);

}  // namespace hearth::gateway
