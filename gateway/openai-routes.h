// The OpenAI routes (POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /v1/models/{id}) and hearth's own history routes (GET /v1/hearth/jobs,
// GET /v1/hearth/jobs/{id}, GET /v1/hearth/nodes), each a client of the broker.
#pragma once

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

void add_openai_routes(router& r, gateway_services& s);
void add_history_routes(router& r, gateway_services& s);

}  // namespace hearth::gateway
