// Why a CURVE peer gets no answer: a ZeroMQ socket monitor (zmq_socket_monitor over inproc) on
// the peer's DEALER, reporting whether a handshake with the broker completed or how it failed.
// A failed handshake is invisible to the socket itself (the messages just wait), so without
// this a refused key and a stopped broker look the same.
#pragma once

#include <optional>
#include <string>
#include <zmq.hpp>

#include "schema/socket-events.h"

namespace hearth::net {

enum class handshake_failure_kind {
  auth,       // ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: the broker's ZAP handler refused the key
  protocol,   // ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: a ZMTP or CURVE protocol error
  no_detail,  // ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: a system error during the handshake
};

struct handshake_failure {
  handshake_failure_kind kind = handshake_failure_kind::no_detail;
  uint32_t value = 0;  // ZAP status (auth), ZMQ_PROTOCOL_ERROR_* (protocol) or errno
  // One side runs CURVE and the other does not: a configuration mismatch, not a refused key.
  bool mechanism_mismatch() const {
    return kind == handshake_failure_kind::protocol &&
           value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
  }
};

// What went wrong, for a person: "ZAP status 400 (the key is not allowed)".
std::string handshake_failure_text(const handshake_failure& f);

// Watches one socket's handshakes. Create it before the socket connects; it belongs to the
// socket's thread and must not outlive the socket's context.
class handshake_monitor {
 public:
  handshake_monitor(zmq::context_t& ctx, zmq::socket_t& watched);

  // Reads the events that have arrived, without blocking.
  void update();
  // For a poll beside the watched socket: readable when an event is waiting.
  zmq::socket_t& events() { return events_.socket(); }

  bool connected() const { return connected_; }  // a TCP connection was made since the start
  bool succeeded() const { return succeeded_; }  // a handshake completed since the start
  // Connections that completed a handshake and then dropped (the peer closed or died): a client
  // that follows a job re-attaches after one, since a restarted broker forgot it.
  uint64_t disconnects() const { return disconnects_; }
  // The latest failure, cleared by a later success.
  const std::optional<handshake_failure>& failure() const { return failure_; }

 private:
  socket_events events_;
  bool connected_ = false;
  bool succeeded_ = false;
  uint64_t disconnects_ = 0;
  bool up_ = false;  // a connection has completed its handshake and not dropped since
  std::optional<handshake_failure> failure_;
};

}  // namespace hearth::net
