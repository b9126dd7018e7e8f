// Which nodes can take a model's jobs: the matching of a queued job to a node (dispatch), and
// what a client is told when none can (a waiting job's reason, a chat job no node can format).
//
// Pure functions of the registry's nodes, apart from the job table and the registry so that the
// rule "what a node did decides, not what it claims" is read in one place, and both the state
// machine (job_table::dispatch, requeue) and the client requests (submit, watch, get_job) ask the
// same questions the same way.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "broker/node-entry.h"
#include "broker/split-plan.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

using node_map = std::map<std::string, node_entry>;  // by name

// The node that gets the next job for `model` now, or nullptr when no online, unquarantined node
// with free credit and at least `slots_needed` slots serves it (a job of n choices runs them on n
// of one node's slots: PROTOCOL.md 10.8). Losses within `quarantine_window` rank first (fewer is
// better), then a node not measured yet that runs nothing (one trial attempt), then the measured
// rate; the nodes' claims (a model loaded, speed, credit) only break ties among nodes not measured.
node_entry* best_node_for(node_map& nodes, const std::string& model, net::steady::time_point now,
                          std::chrono::milliseconds quarantine_window, uint32_t slots_needed = 1);

// The most slots of an online node serving `model` (0 when none does): a job of more choices than
// that cannot run until such a node comes.
uint32_t most_slots_serving(const node_map& nodes, const std::string& model);

// Whether another node than `except` could run `model` now (online, not quarantined).
bool healthy_node_serves(const node_map& nodes, const std::string& model,
                         const std::string& except);

// Why a job for `model` (of `slots_needed` choices) waits although it may be first in line: ""
// when a node could run it, else which nodes serve the model and where they are ("last seen: node
// desk, 3h ago"), or that they have too few slots for its choices.
std::string waiting_reason(const node_map& nodes, const std::string& model,
                           uint32_t slots_needed = 1);

// Whether some online, unquarantined node can run `model` whole (node_entry::can_hold).
bool healthy_node_holds(const node_map& nodes, const std::string& model);

// A split of `model` over the online, unquarantined nodes that serve it, advertise its layout and
// hold stages (PROTOCOL.md 17), by what each offers (split-plan.h): what the broker runs a model
// on when none of them can hold it alone, or why it cannot (the bytes missing).
split_plan model_split_plan(const node_map& nodes, const std::string& model);

// Whether chat messages for `model` cannot be formatted: online nodes serve it and none of them
// has a chat template for it.
bool chat_unformattable(const node_map& nodes, const std::string& model);

}  // namespace hearth::broker
