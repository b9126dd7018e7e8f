// Who may talk to the broker (peer-gate.h).
#include "broker/peer-gate.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hearth::broker {
namespace {
// Commands only admin keys may send: forgetting and releasing nodes, pruning the history,
// managing API keys, moving models between nodes (a pull fills disks, an evict empties them).
bool admin_only(wire::command cmd) {
  using wire::command;
  return cmd == command::forget_node || cmd == command::release_node ||
         cmd == command::prune_jobs || cmd == command::create_api_key ||
         cmd == command::list_api_keys || cmd == command::revoke_api_key ||
         cmd == command::pull_model || cmd == command::place_model || cmd == command::evict_model;
}

// Which role may send a command: nodes speak the node protocol, clients and admins the client
// protocol, and admin_only commands are for admins.
bool role_may_send(peer_role role, wire::command cmd) {
  if (wire::command_from_node(cmd)) return role == peer_role::node;
  if (admin_only(cmd)) return role == peer_role::admin;
  return role == peer_role::client || role == peer_role::admin;
}
}  // namespace

std::optional<peer> peer_gate::identify(const net::received& msg) {
  if (!auth_) return peer{peer_role::admin, "", "", msg.peer_address};
  const allowed_key* k = auth_->find(msg.user_id);
  if (!k) {
    // Connected with a key that has since been removed: nothing it sends is handled.
    metrics_.add(metric::auth_failures, {"key_removed"});
    if (auto more = auth_log_.admit(net::steady::now())) {
      spdlog::warn("auth: dropped a message from {} (key {}): the key is no longer allowed{}",
                   msg.peer_address, msg.user_id.empty() ? "none" : msg.user_id, *more);
    }
    return std::nullopt;
  }
  return peer{k->role, msg.user_id, k->name, msg.peer_address};
}

bool peer_gate::refuses(const std::string& rid, const peer& who, wire::command cmd,
                        std::string_view body) {
  // On a broker without auth every peer may send everything (it is an admin and a node).
  if (!auth_ || role_may_send(who.role, cmd)) return false;
  const bool node_cmd = wire::command_from_node(cmd);
  metrics_.add(metric::auth_failures, {"role"});
  if (auto more = auth_log_.admit(net::steady::now())) {
    spdlog::warn("refused a {} from {} key '{}': not allowed for that role{}",
                 wire::command_name(cmd), peer_role_name(who.role), who.name, *more);
  }
  out_.send_error(rid, wire::peek_request_id(body).value_or(0), wire::error_code::unauthorized,
                  std::string(wire::command_name(cmd)) + " needs " +
                      (node_cmd          ? "a node key (in the broker's nodes/ folder)"
                       : admin_only(cmd) ? "an admin key (in the broker's admins/ folder)"
                                         : "a client or admin key (in clients/ or admins/)") +
                      "; this key is a " + std::string(peer_role_name(who.role)) + " key");
  return true;
}

bool peer_gate::refresh(net::steady::time_point checked) {
  if (checked >= next_auth_refresh_) {
    next_auth_refresh_ = checked + std::chrono::seconds(1);
    next_auth_check_ = checked + std::chrono::milliseconds(100);
    auth_->refresh();
  } else if (checked >= next_auth_check_) {
    next_auth_check_ = checked + std::chrono::milliseconds(100);
    auth_->refresh_if_changed();
  }
  if (auth_->generation() == auth_generation_) return false;
  auth_generation_ = auth_->generation();
  return true;
}

void peer_gate::drop_removed_keys(const node_registry& nodes) {
  const std::string why = "its key is no longer allowed (" + auth_->dir() + ")";
  for (const auto& [name, n] : nodes.nodes()) {
    if (!n.online || n.key.empty()) continue;
    const allowed_key* k = auth_->find(n.key);
    if (!k || k->role != peer_role::node) out_.to_drop().push_back({n.routing_id, why});
  }
  for (const auto& [rid, c] : connections_) {
    if (!auth_->find(c.key)) out_.to_drop().push_back({rid, why});
  }
}

bool peer_gate::note_connection(const std::string& rid, const std::string& key,
                                net::received& msg) {
  const auto [it, added] = connections_.try_emplace(rid);
  if (!added) return false;
  it->second.key = key;
  if (!msg.frames.empty()) it->second.conn = peer_connection_of(msg.frames.front());
  return connections_.size() >= std::max<size_t>(1024, 2 * connections_kept_);
}

void peer_gate::prune_connections(const std::unordered_set<std::string>& keep,
                                  const std::function<bool(const std::string&)>& heard_lately) {
  std::erase_if(connections_, [&](const auto& kv) {
    return !keep.contains(kv.first) && outboxes_.bytes_of(kv.first) == 0 &&
           outboxes_.pipe_bytes_of(kv.first) == 0 && !heard_lately(kv.first);
  });
  connections_kept_ = connections_.size();
}

void peer_gate::close(const std::string& rid, net::steady::time_point now) {
  // Its connection ends, and with it what ZeroMQ holds for it. One that cannot be ended (inproc:
  // inside this process) is forgotten, so that it does not stand in the way of the total.
  bool closed = false;
  if (auto c = connections_.find(rid); c != connections_.end()) {
    closed = peer_connection_close(c->second.conn);
    connections_.erase(c);
  }
  if (closed) {
    outboxes_.closing(rid);
  } else {
    outboxes_.forget(rid);
  }
  // Forget peers that were dropped long ago, so that the map stays as small as the drop rate.
  std::erase_if(dropped_until_, [&](const auto& kv) { return kv.second <= now; });
  dropped_until_[rid] = now + std::chrono::milliseconds(cfg_.peer_stall_ms);
}

bool peer_gate::ignored(const std::string& rid, net::steady::time_point now) {
  if (!out_.any_queued_to() && dropped_until_.empty()) return false;
  if (out_.dropped_this_turn(rid)) return true;
  auto it = dropped_until_.find(rid);
  if (it == dropped_until_.end()) return false;
  if (now < it->second) return true;
  dropped_until_.erase(it);
  return false;
}

}  // namespace hearth::broker
