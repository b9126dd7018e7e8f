// SCAFFOLD (issue 17, being written): replaced by the OpenAI routes before the issue closes.
#include "gateway/openai-routes.h"

namespace hearth::gateway {

void add_openai_routes(router&, gateway_services&) {}
void add_history_routes(router&, gateway_services&) {}

}  // namespace hearth::gateway
