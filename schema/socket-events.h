// A ZeroMQ socket monitor (zmq_socket_monitor over an inproc PAIR): the events libzmq reports for
// one socket's connections, read without blocking. The CLI and the node watch their handshakes
// with it (handshake-monitor.h), the broker its accepted connections (broker/zap-handler.h).
#pragma once

#include <cstdint>
#include <optional>
#include <zmq.hpp>

namespace hearth::net {

// One event: ZMQ_EVENT_* and its value (a descriptor, an errno, a ZAP status ... by event).
struct socket_event {
  uint16_t event = 0;
  uint32_t value = 0;
};

class socket_events {
 public:
  // Starts monitoring `watched` for the events in `mask`. Create it before the socket binds or
  // connects; it belongs to the socket's thread and must not outlive the socket's context.
  socket_events(zmq::context_t& ctx, zmq::socket_t& watched, int mask);
  ~socket_events();
  socket_events(const socket_events&) = delete;
  socket_events& operator=(const socket_events&) = delete;

  // The next event that has arrived, or nullopt when none is waiting.
  std::optional<socket_event> next();
  // For a poll beside the watched socket: readable when an event is waiting.
  zmq::socket_t& socket() { return pair_; }

 private:
  zmq::socket_t* watched_;
  zmq::socket_t pair_;
};

}  // namespace hearth::net
