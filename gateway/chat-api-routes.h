// POST /v1/responses (responses-api.h) and POST /v1/messages (anthropic-api.h): the body parsed
// (a refusal is a 400 in the API's shape), the model checked against the broker's list (404
// unknown, 503 no node online), then the job submitted and followed into the API's answer
// (submit_and_answer, openai-routes.h: as the caller, cancelled when the client goes away, kept
// alive). Both share one cached model list.
#pragma once

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

void add_chat_api_routes(router& r, gateway_services& s);

}  // namespace hearth::gateway
