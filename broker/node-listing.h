// What clients are told about the nodes: list_nodes (online nodes first) and list_models (the
// models the nodes serve, with the jobs waiting for each, and the files nodes skipped), each
// capped to fit one message (reply-list.h). Read off the registry; they change nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "broker/node-registry.h"
#include "broker/pipelines.h"
#include "broker/turn-output.h"
#include "schema/messages.h"

namespace hearth::broker {

void list_nodes(turn_output& out, const std::string& rid, const wire::list_nodes& m,
                const node_registry& nodes);
// `queued`: jobs waiting per model; `transfers`: running, then recently finished
// (transfer-table.h).
// `pipelines`: a split model's stages.
void list_models(turn_output& out, const std::string& rid, const wire::list_models& m,
                 const node_registry& nodes, const std::map<std::string, uint32_t>& queued,
                 std::vector<wire::transfer_info> transfers, const pipeline_table& pipelines);

}  // namespace hearth::broker
