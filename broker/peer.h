// Who sent a message to the broker.
#pragma once

#include <string>

#include "broker/allow-list.h"

namespace hearth::broker {

// The role and key the ZAP handler vouched for (broker/zap-handler.h). On a broker without auth
// every peer is an admin with an empty key: it trusts whoever can reach it. A client request that
// presents an API key acts as that key instead: role client, key "api:" + the key's id
// (api-key-service.cpp).
struct peer {
  peer_role role = peer_role::admin;
  std::string key;   // Z85 public key; "" without auth; "api:" + id for an API key
  std::string name;  // the key's certificate file name, or the API key's name
  // The IP address its connection comes from (ZeroMQ's Peer-Address; "" over inproc and ipc):
  // where a node's transfer socket is reached (transfer_endpoint, model-holders.h).
  std::string address;
};

// A peer's ZeroMQ routing id in hex, for the log.
inline std::string peer_name(const std::string& routing_id) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : routing_id) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

// Whether `who` may see and act on a job owned by `owner` (its own, or an admin).
inline bool may_access(const peer& who, const std::string& owner) {
  return who.role == peer_role::admin || who.key == owner;
}

}  // namespace hearth::broker
