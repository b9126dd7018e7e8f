// Who may register as a node: node_hello's rate limits (per connection and overall; a flood of
// hellos is refused limit_reached and logged at most once a second) and its checks: the protocol
// version, the sizes, max_nodes and each key's share of them (max_nodes_per_key), a name owned
// by another key, and a name in use by a live node on another machine or in another process.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "broker/config.h"
#include "broker/log-limiter.h"
#include "broker/node-entry.h"
#include "broker/peer.h"
#include "broker/token-bucket.h"
#include "broker/turn-output.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class node_admission {
 public:
  node_admission(const broker_config& cfg, turn_output& out) : cfg_(cfg), out_(out) {}

  // Whether the hello `m` from `rid` (sent with `who`'s key) may register or take over its name
  // among `nodes`; false after telling the peer why.
  bool admit(const std::string& rid, const peer& who, const wire::node_hello& m,
             const std::map<std::string, node_entry>& nodes);
  // Forgets the rate limits of connections that have not said hello for a while.
  void forget_idle(net::steady::time_point now);

 private:
  // The hello rate limits: false (and the peer told limit_reached) when over them.
  bool hello_admitted(const std::string& rid);

  const broker_config& cfg_;
  turn_output& out_;
  std::unordered_map<std::string, token_bucket> hello_peer_buckets_;
  std::optional<token_bucket> hello_bucket_;
  log_limiter hello_log_{1, 5};
};

}  // namespace hearth::broker
