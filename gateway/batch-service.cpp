// SCAFFOLD (issue 17, being written): replaced by the batch service before the issue closes.
#include "gateway/batch-service.h"

namespace hearth::gateway {

struct batch_service::impl {};
batch_service::batch_service(gateway_services&, const std::string&) {}
batch_service::~batch_service() = default;
void batch_service::add_routes(router&) {}
void batch_service::start() {}

}  // namespace hearth::gateway
