// GET /metrics (Prometheus's text format): the broker's metrics and the gateway's own.
#pragma once

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

void add_metrics_route(router& r, gateway_services& s);

}  // namespace hearth::gateway
