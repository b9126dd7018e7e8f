// The broker's ZAP handler (ZeroMQ RFC 27): libzmq asks it, over inproc, whether a peer that
// completed the CURVE handshake may connect. It answers from the allow-list (broker/allow-list.h):
// an allowed key is accepted with the key (Z85) as its User-Id, which every later message of that
// connection carries (net::received::user_id); any other key is refused, so nothing it sends ever
// reaches the broker. Refusals are logged, at most a few lines a minute, naming key and address.
//
// It runs on the broker's thread (the broker polls its socket beside the ROUTER): handshakes are
// rare next to messages, and the allow-list then needs no lock.
#pragma once

#include <cstdint>
#include <string>
#include <zmq.hpp>

#include "broker/allow-list.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class zap_handler {
 public:
  // Binds inproc://zeromq.zap.01 in `ctx`; must happen before the ROUTER binds. `keys` outlives it.
  zap_handler(zmq::context_t& ctx, allow_list& keys);

  zmq::socket_t& socket() { return rep_; }
  // Answers the requests waiting (at most a few hundred per call), never blocking.
  void serve();

  uint64_t refused() const { return refused_; }

 private:
  void answer(const std::vector<zmq::message_t>& request);
  void log_refusal(const std::string& key, const std::string& address, const std::string& why);

  allow_list& keys_;
  zmq::socket_t rep_;
  net::steady::time_point last_rescan_{};
  uint64_t refused_ = 0;
  // Rate limit of refusal lines: at most k_log_burst per minute, then one summary line.
  net::steady::time_point log_window_{};
  uint32_t logged_in_window_ = 0;
  uint64_t unlogged_ = 0;
};

}  // namespace hearth::broker
