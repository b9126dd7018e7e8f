// The broker's ZAP handler (ZeroMQ RFC 27): libzmq asks it, over inproc, whether a peer that
// completed the CURVE handshake may connect. It answers from the allow-list (broker/allow-list.h):
// an allowed key is accepted with the key (Z85) as its User-Id, which every later message of that
// connection carries (net::received::user_id); any other key is refused, so nothing it sends ever
// reaches the broker. Refusals are logged, about ten lines a minute at most, naming key and
// address.
//
// It also caps the authenticated connections from one address (`max_connections_per_address`):
// past the cap, further keys from that address are refused, except admin keys, so an admin can
// always get in. A leaked key cannot hold thousands of descriptors. Connections that never pass
// the handshake do not count (300 raw TCP connections from one host locked every client key of
// that host out, issue 52): they are closed by ZMQ_HANDSHAKE_IVL within 5 s, and their number
// is bounded by the broker's descriptor limit.
//
// Counting them: a socket monitor on the ROUTER reports each accepted connection (with its
// descriptor, whose peer address the handler reads) and each that ended, but not which of them
// the handler let in (a ZAP request names the address, not the connection). A connection that
// ends with no request from its address answered since it was accepted was never answered. Else
// libzmq reports most failed handshakes (timed out, the peer went away, most protocol errors)
// right before that connection's end, from its one I/O thread, and those were not let in either;
// every other end is taken as one of the address's refused connections first, then as one let
// in. So the count is exact once an address's refused connections have closed, and never above
// its open connections; a mistake errs towards letting keys in, never towards locking them out.
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
  size_t connections() const { return open_.size(); }
  // Connections from `address` that the handler let in and that are still open.
  uint32_t authenticated_from(const std::string& address) const;

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
  // Per peer address: connections open, those of them let in and those refused whose end has
  // not been seen yet, and the requests from there answered so far (a connection that ended
  // with no answer to its address since it was accepted was never answered).
  struct address_counts {
    uint32_t open = 0;
    uint32_t authenticated = 0;
    uint32_t refused = 0;
    uint64_t answers = 0;
  };
  std::map<std::string, address_counts> addresses_;
  struct open_connection {
    std::string address;
    uint64_t answers_at_accept = 0;
  };
  std::map<int, open_connection> open_;     // by descriptor
  bool handshake_failed_ = false;           // the last event read was a failed handshake
  log_limiter refusal_log_{10.0 / 60, 10};  // ten lines at once, then one every 6 s
};

}  // namespace hearth::broker
