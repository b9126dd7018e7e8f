#include "gateway/routes.h"

#include "gateway/batch-service.h"
#include "gateway/metrics-route.h"
#include "gateway/openai-routes.h"

namespace hearth::gateway {

std::shared_ptr<void> add_routes(router& r, gateway_services& s) {
  add_openai_routes(r, s);
  add_history_routes(r, s);
  add_metrics_route(r, s);
  auto batches = std::make_shared<batch_service>(s, s.options().db);
  batches->add_routes(r);
  s.after(std::chrono::milliseconds(0), [b = batches.get()] { b->start(); });
  return batches;
}

}  // namespace hearth::gateway
