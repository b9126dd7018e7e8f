#include "schema/socket-events.h"

#include <atomic>
#include <cstring>
#include <string>

#include "schema/zmq-io.h"

namespace hearth::net {

socket_events::socket_events(zmq::context_t& ctx, zmq::socket_t& watched, int mask)
    : watched_(&watched), pair_(ctx, zmq::socket_type::pair) {
  static std::atomic<uint64_t> next{0};
  const std::string address = "inproc://hearth-socket-events-" + std::to_string(next++);
  if (zmq_socket_monitor(watched.handle(), address.c_str(), mask) != 0) throw zmq::error_t();
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(address);
}

socket_events::~socket_events() {
  // Stops the monitor so that libzmq's end of the pair goes away with it.
  if (watched_->handle() != nullptr) zmq_socket_monitor(watched_->handle(), nullptr, 0);
}

std::optional<socket_event> socket_events::next() {
  while (true) {
    // Each event is two frames: 6 bytes (uint16 event, uint32 value), then an endpoint.
    zmq::message_t head, address;
    if (!recv_part(pair_, head, zmq::recv_flags::dontwait)) return std::nullopt;
    if (head.more()) (void)recv_part(pair_, address, zmq::recv_flags::none);
    if (head.size() < 6) continue;  // not a version-1 event
    socket_event e;
    std::memcpy(&e.event, head.data(), 2);
    std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, 4);
    return e;
  }
}

}  // namespace hearth::net
