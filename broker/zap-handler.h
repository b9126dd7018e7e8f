// The broker's ZAP handler (ZeroMQ RFC 27): libzmq asks it, over inproc, whether a peer that
// completed the CURVE handshake may connect. It answers from the allow-list (broker/allow-list.h):
// an allowed key is accepted with the key (Z85) as its User-Id, which every later message of that
// connection carries (net::received::user_id); any other key is refused, so nothing it sends ever
// reaches the broker. Refusals are logged, about ten lines a minute at most, naming key and
// address.
//
// It also caps the connections from one address (`max_connections_per_address`): a socket monitor
// on the ROUTER reports each accepted connection (with its descriptor, whose peer address the
// handler reads) and each that ended; past the cap, further keys from that address are refused,
// except admin keys, so an admin can always get in. A leaked key cannot hold thousands of
// descriptors, and a stranger's connections, which never pass the handshake, are closed by
// ZMQ_HANDSHAKE_IVL within 5 s and only ever count against its own address.
//
// It runs on the broker's thread (the broker polls its sockets beside the ROUTER): handshakes are
// rare next to messages, and the allow-list then needs no lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <zmq.hpp>

#include "broker/allow-list.h"
#include "broker/log-limiter.h"
#include "schema/socket-events.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class zap_handler {
 public:
  // Why a peer was refused, for the broker's counters ("no_curve", "unknown_key",
  // "address_cap").
  using refusal_fn = std::function<void(const char* reason)>;
  // Binds inproc://zeromq.zap.01 in `ctx` and monitors `router`; must happen before the ROUTER
  // binds. `keys` outlives it.
  zap_handler(zmq::context_t& ctx, allow_list& keys, zmq::socket_t& router,
              uint32_t max_per_address, refusal_fn on_refusal = {});

  // The sockets to poll: ZAP requests and the ROUTER's connection events.
  zmq::socket_t& socket() { return rep_; }
  zmq::socket_t& events() { return monitor_.socket(); }
  // Reads the connection events and answers the requests waiting (at most a few hundred per
  // call), never blocking.
  void serve();
  // Connections open now (accepted by the ROUTER, not yet ended; handshakes included).
  size_t connections() const { return address_of_.size(); }

 private:
  void answer(const std::vector<zmq::message_t>& request);
  void log_refusal(const char* reason, const std::string& key, const std::string& address,
                   const std::string& why);

  void read_events();

  allow_list& keys_;
  zmq::socket_t rep_;
  net::socket_events monitor_;  // the ROUTER's accepted and ended connections
  uint32_t max_per_address_;
  refusal_fn on_refusal_;
  std::map<int, std::string> address_of_;        // open connections: descriptor -> peer address
  std::map<std::string, uint32_t> per_address_;  // open connections per peer address
  log_limiter refusal_log_{10.0 / 60, 10};       // ten lines at once, then one every 6 s
};

}  // namespace hearth::broker
