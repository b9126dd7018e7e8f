// Every route hearth-gateway serves (the daemon and `hearth up --http` alike): the OpenAI API,
// hearth's history, batches and files.
#pragma once

#include <memory>

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

std::shared_ptr<void> add_routes(router& r, gateway_services& s);

}  // namespace hearth::gateway
