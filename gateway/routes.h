// Every route the gateway serves (the daemon and `hearth up --http` alike): the OpenAI API,
// hearth's history, batches and files, the dashboard's live data and its files.
#pragma once

#include <memory>
#include <span>

#include "gateway/dashboard-files.h"
#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

std::shared_ptr<void> add_routes(router& r, gateway_services& s);

// GET /, /dashboard and /dashboard/{file}: `files` (none: a 404 that says so). Public.
void add_dashboard_routes(router& r, std::span<const dashboard_file> files);

// GET /v1/hearth/live (snapshots of nodes, queues and the caller's jobs) and
// GET /v1/hearth/jobs/{id}/events (one job's events), both Server-Sent Events. What it returns
// (the live snapshots' state) lives as long as the gateway.
std::shared_ptr<void> add_live_routes(router& r, gateway_services& s);

}  // namespace hearth::gateway
