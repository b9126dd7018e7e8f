// Which online node holds which model, by digest, read off what the nodes advertise (their hello
// and node_status model lists): the holders a copy comes from, the digest clients are shown, and
// what a model needs of a node that is to hold it.
//
// Pure functions of the registry's nodes, apart from the transfers (transfer-table.h) and their
// planning (model-placement.h), so that list_models and the placement of a model name the same
// holders the same way; like node-match.h, they keep no state of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "broker/node-match.h"
#include "schema/messages.h"

namespace hearth::broker {

// What `n` advertises for `model`, or nullptr when it does not list it.
const wire::model_info* model_advertised(const node_entry& n, const std::string& model);

// The digest the broker lists for `model`: the first online node's (by name) that sent one; ""
// when none did.
std::string listed_digest(const node_map& nodes, const std::string& model);
// The online nodes that advertise `model` with `digest` (its holders), by name.
std::vector<std::string> model_holders(const node_map& nodes, const std::string& model,
                                       const std::string& digest);

// The bytes a node's store needs for `m`: its files, or what it says its size is if more.
uint64_t model_bytes(const wire::model_info& m);
// RAM and GPU memory free on `n`, as it last said: where a placed model runs best.
uint64_t node_free_memory(const node_entry& n);

// Where peers reach a node's socket on `port`: the address its broker connection comes from (none
// over inproc or ipc, which only a node on the broker's machine uses: loopback). Its transfer
// socket (PROTOCOL.md 16.4) and its stage socket (17.2).
std::string peer_endpoint(const node_entry& n, uint32_t port);
inline std::string transfer_endpoint(const node_entry& n) {
  return peer_endpoint(n, n.transfer_port);
}
inline std::string stage_endpoint(const node_entry& n) {
  return peer_endpoint(n, n.stage_port);
}

}  // namespace hearth::broker
