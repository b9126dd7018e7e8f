// Who may register as a node (node-admission.h).
#include "broker/node-admission.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hearth::broker {
namespace {
constexpr size_t k_max_node_name_bytes = 255;
}  // namespace

bool node_admission::hello_admitted(const std::string& rid) {
  const auto now = net::steady::now();
  if (!hello_bucket_) {
    hello_bucket_.emplace(cfg_.hello_rate, cfg_.hello_burst, now);
  }
  auto peer = hello_peer_buckets_.try_emplace(rid, cfg_.hello_rate_per_peer,
                                              cfg_.hello_burst_per_peer, now);
  std::string why;
  if (!peer.first->second.take(now)) {
    why = "more than " + std::to_string(cfg_.hello_rate_per_peer) +
          " node_hello per second from this connection";
  } else if (!hello_bucket_->take(now)) {
    why = "more than " + std::to_string(cfg_.hello_rate) +
          " node_hello per second from all connections";
  } else {
    return true;
  }
  out_.send_error(rid, 0, wire::error_code::limit_reached, why + "; try again later");
  // A flood must not become a flood of log lines.
  if (auto more = hello_log_.admit(now)) spdlog::warn("refused a node_hello: {}{}", why, *more);
  return false;
}

bool node_admission::admit(const std::string& rid, const peer& who, const wire::node_hello& m,
                           const std::map<std::string, node_entry>& nodes) {
  if (!hello_admitted(rid)) return false;
  if (m.version != wire::protocol_version) {
    out_.send_error(rid, 0, wire::error_code::version_mismatch,
                    "node protocol version " + std::to_string(m.version) + " is not supported");
    return false;
  }
  if (m.name.empty() || m.slots == 0) {
    out_.send_error(rid, 0, wire::error_code::malformed, "node_hello needs a name and slots >= 1");
    return false;
  }
  if (m.name.size() > k_max_node_name_bytes || m.hostname.size() > k_max_node_name_bytes) {
    out_.send_error(rid, 0, wire::error_code::malformed,
                    "node_hello: name and hostname are at most 255 bytes");
    return false;
  }
  if (const size_t bytes = wire::encode(m).size(); bytes > k_max_registration_bytes) {
    out_.send_error(rid, 0, wire::error_code::limit_reached,
                    "node_hello is " + std::to_string(bytes) + " bytes; at most " +
                        std::to_string(k_max_registration_bytes) + " (advertise fewer models)");
    return false;
  }
  auto it = nodes.find(m.name);
  if (it == nodes.end() && nodes.size() >= cfg_.max_nodes) {
    out_.send_error(
        rid, 0, wire::error_code::limit_reached,
        "the broker has " + std::to_string(nodes.size()) +
            " nodes registered (max_nodes); forget offline ones with `hearth nodes forget`");
    return false;
  }
  // One node key owns a bounded share of the records, so that it cannot lock the others out.
  // Without auth every peer is trusted (an admin): max_nodes alone bounds them.
  if (it == nodes.end() && !who.key.empty()) {
    const auto owned = size_t(std::count_if(
        nodes.begin(), nodes.end(), [&](const auto& kv) { return kv.second.key == who.key; }));
    if (owned >= cfg_.max_nodes_per_key) {
      out_.send_error(rid, 0, wire::error_code::limit_reached,
                      "this node key has " + std::to_string(owned) +
                          " nodes registered (max_nodes_per_key); forget offline ones with `hearth "
                          "nodes forget`");
      return false;
    }
  }
  // With auth a name belongs to the key that first used it: another key cannot take it over,
  // whatever it claims about itself (forget the node to free the name).
  if (it != nodes.end() && !who.key.empty() && !it->second.key.empty() &&
      it->second.key != who.key) {
    spdlog::warn("refused node '{}' from key '{}': the name belongs to another node key", m.name,
                 who.name);
    out_.send_error(rid, 0, wire::error_code::name_taken,
                    "the name " + m.name + " is in use by another node key; choose --name");
    return false;
  }
  if (it != nodes.end() && it->second.online && it->second.routing_id != rid) {
    // A node that reconnects after a network failure says hello from a new socket before the
    // old one is declared dead; the same hostname means it is the same machine. Two machines
    // sharing one name (cloned VMs, Raspberry Pis all called "raspberrypi") are refused instead
    // of knocking each other off.
    if (it->second.hostname != m.hostname) {
      spdlog::warn("refused node '{}' from {}: a node of that name is connected from {}", m.name,
                   m.hostname, it->second.hostname);
      out_.send_error(rid, 0, wire::error_code::name_taken,
                      "the name " + m.name + " is in use by a node connected from " +
                          it->second.hostname + "; choose --name");
      return false;
    }
    // The same machine, but another node process (two `hearth-node --name X` on one host): the
    // established one keeps the name while it is heard from, instead of the two knocking each
    // other off for ever. One silent for two heartbeat intervals may be a killed process whose
    // restart this is, and is replaced.
    const auto alive = std::chrono::milliseconds(2 * int64_t(cfg_.heartbeat_ms));
    if (m.instance != 0 && it->second.instance != 0 && m.instance != it->second.instance &&
        net::steady::now() - it->second.last_heard < alive) {
      spdlog::warn("refused node '{}': another node process on {} is connected with that name",
                   m.name, m.hostname);
      out_.send_error(rid, 0, wire::error_code::name_taken,
                      "the name " + m.name + " is in use by another node process on " + m.hostname +
                          "; choose --name");
      return false;
    }
  }
  return true;
}

void node_admission::forget_idle(net::steady::time_point now) {
  for (auto it = hello_peer_buckets_.begin(); it != hello_peer_buckets_.end();) {
    it = it->second.full(now) ? hello_peer_buckets_.erase(it) : std::next(it);
  }
}

}  // namespace hearth::broker
