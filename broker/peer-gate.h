// Who may talk to the broker, and the peers it stops hearing.
//
// With --auth every message is checked against the allow-list (allow-list.h), not only the
// handshake: a key removed since its connection opened is no longer served (identify()), a role
// may send only its commands (refuses()), and the connections of removed keys are dropped
// (drop_removed_keys(), after refresh() saw the list lose keys). The connection of each peer that
// asks something is remembered (its key, and its descriptor so that a dropped peer's connection
// is closed: peer-connection.h); a dropped peer's messages are discarded unread for
// peer_stall_ms (ignored()).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "broker/allow-list.h"
#include "broker/config.h"
#include "broker/log-limiter.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/peer-connection.h"
#include "broker/peer-outbox.h"
#include "broker/peer.h"
#include "broker/turn-output.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class peer_gate {
 public:
  // `auth`: the allow-list with --auth (empty: every peer is an admin); `auth_log`: the limiter
  // of lines a peer can provoke, shared with the API keys' refusals.
  peer_gate(const broker_config& cfg, std::optional<allow_list>& auth, turn_output& out,
            peer_outboxes& outboxes, broker_metrics& metrics, log_limiter& auth_log)
      : cfg_(cfg),
        auth_(auth),
        out_(out),
        outboxes_(outboxes),
        metrics_(metrics),
        auth_log_(auth_log) {}

  // The sender of `msg`, or nullopt (after logging) when its key is no longer allowed.
  std::optional<peer> identify(const net::received& msg);
  // With auth, whether `who` may not send `cmd` (told unauthorized, and why).
  bool refuses(const std::string& rid, const peer& who, wire::command cmd, std::string_view body);
  // Rescans the allow-list (every second, or after 100 ms when a folder changed): true when it
  // lost keys since the last drop_removed_keys().
  bool refresh(net::steady::time_point now);
  // The connections of a key that is gone (a node's, also one whose key left nodes/) are
  // dropped at the start of the next turn, as peers that stopped reading.
  void drop_removed_keys(const node_registry& nodes);

  // Remembers the connection of a peer that asks something (a client's request, a node's
  // hello): its key and its descriptor. True when the map grew enough to be pruned.
  bool note_connection(const std::string& rid, const std::string& key, net::received& msg);
  // Keeps only the connections that may still be sent something: `keep` (watchers, nodes),
  // peers with something in ZeroMQ's pipe, and those `heard_lately`.
  void prune_connections(const std::unordered_set<std::string>& keep,
                         const std::function<bool(const std::string&)>& heard_lately);
  // A dropped peer: its connection ends, and with it what ZeroMQ holds for it (one that cannot
  // be ended, inproc, is forgotten by the outboxes), and what it sends for the next
  // peer_stall_ms is discarded unread.
  void close(const std::string& rid, net::steady::time_point now);
  bool ignored(const std::string& rid, net::steady::time_point now);

 private:
  const broker_config& cfg_;
  std::optional<allow_list>& auth_;
  turn_output& out_;
  peer_outboxes& outboxes_;
  broker_metrics& metrics_;
  log_limiter& auth_log_;
  net::steady::time_point next_auth_refresh_{};
  net::steady::time_point next_auth_check_{};  // the folders' times, every 100 ms
  uint64_t auth_generation_ = 0;               // the allow-list's, at the last drop_removed_keys
  // Connections by routing id (note_connection), and the map's size after it was last pruned.
  struct connection {
    std::string key;  // with auth
    peer_connection conn;
  };
  std::unordered_map<std::string, connection> connections_;
  size_t connections_kept_ = 0;
  std::unordered_map<std::string, net::steady::time_point> dropped_until_;  // ignored till then
};

}  // namespace hearth::broker
