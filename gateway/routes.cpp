#include "gateway/routes.h"

#include "gateway/batch-service.h"
#include "gateway/chat-api-routes.h"
#include "gateway/metrics-route.h"
#include "gateway/openai-routes.h"

namespace hearth::gateway {

std::shared_ptr<void> add_routes(router& r, gateway_services& s) {
  add_openai_routes(r, s);
  add_chat_api_routes(r, s);  // /v1/responses, /v1/messages
  add_history_routes(r, s);
  add_metrics_route(r, s);
  add_dashboard_routes(r, s.options().dashboard);
  auto live = add_live_routes(r, s);
  auto batches = std::make_shared<batch_service>(s, s.options().db);
  batches->add_routes(r);
  s.after(std::chrono::milliseconds(0), [b = batches.get()] { b->start(); });
  // Both go when the gateway does, before the link and the server.
  return std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<batch_service>>>(
      std::move(live), std::move(batches));
}

}  // namespace hearth::gateway
