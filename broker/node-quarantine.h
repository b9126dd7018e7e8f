// The quarantine bookkeeping of a node: the attempts it lost (counted, the last few kept with
// their reasons for node_summary), the quarantine that follows quarantine_after losses within the
// window (doubling on a repeat), its end, and an admin's release.
//
// Apart from the registry because it is a policy over one node's loss record (node_entry's
// losses and quarantine fields), with no connection, store or message in it: the registry calls
// it where an attempt is lost, at its timers and for release_node.
#pragma once

#include <cstdint>
#include <string>

#include "broker/config.h"
#include "broker/node-entry.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// A loss's reason as node_summary keeps it: a node's own error text may be long, so it is cut
// (before a character, not inside one: the JSON of `hearth nodes --json` needs UTF-8).
std::string loss_reason(const std::string& why);

// An attempt of `n` (job `job_id`'s attempt `attempt`) ended without finishing on the node side:
// counts it, remembers it for node_summary, and quarantines the node after cfg.quarantine_after
// such losses within cfg.quarantine_window_ms. Hand-backs within a second of the counted one
// count once (a node shutting down hands back everything at once).
void count_loss(node_entry& n, const broker_config& cfg, uint64_t job_id, uint32_t attempt,
                const std::string& why, bool handback);

// As if `n` had lost nothing lately (an admin's release_node): a new quarantine starts at
// quarantine_ms again. Returns whether it was quarantined.
bool forgive_losses(node_entry& n, net::steady::time_point now);

// Whether `n`'s quarantine ended by `now` and was not noted yet (then it is noted and logged).
bool quarantine_ended(node_entry& n, net::steady::time_point now);

}  // namespace hearth::broker
