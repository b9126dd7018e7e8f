// ZeroMQ plumbing shared by the broker, the node and the CLI: sockets configured the hearth way
// and messages sent and received as hearth envelopes (schema/codec.h). cppzmq, RAII throughout.
// A socket belongs to one thread; these helpers never share one.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "schema/codec.h"

namespace hearth::net {

// A socket with ZMQ_MAXMSGSIZE set to the protocol's limit (larger messages drop the
// connection), linger 0 and, for ROUTER sockets, ROUTER_MANDATORY off (a message to a vanished
// peer is dropped, not an error).
zmq::socket_t make_socket(zmq::context_t& ctx, zmq::socket_type type);

// One frame received or sent, the call made again when a signal interrupts it. libzmq fails any
// call that looks at its command mailbox with EINTR while a signal is pending, non-blocking ones
// included (poll() with a zero timeout reports a pending signal), also between the frames of one
// message. The daemons' handlers only set a flag that their loops read, so calling again loses
// nothing, and a message is never left half sent. recv_part: nullopt when nothing is waiting
// (EAGAIN); send_part: false when the frame cannot be queued (EAGAIN). Other errors throw.
std::optional<size_t> recv_part(zmq::socket_t& s, zmq::message_t& part, zmq::recv_flags flags);
bool send_part(zmq::socket_t& s, zmq::const_buffer frame, zmq::send_flags flags);

// One received message: the routing id (ROUTER sockets only) and the three protocol frames.
struct received {
  std::string routing_id;
  // What the ZAP handler said about the sender (RFC 27): its User-Id (the broker puts the Z85
  // public key there) and its address. Empty without a ZAP handler.
  std::string user_id;
  std::string peer_address;
  std::vector<zmq::message_t> frames;
  std::vector<std::string_view> views() const;
};

// Receives one multipart message without blocking; nullopt when none is waiting (EAGAIN).
// For ROUTER sockets the first frame becomes routing_id. Messages with more than 8 frames are
// read whole and returned as they are, for open_envelope() to refuse.
std::optional<received> try_recv(zmq::socket_t& s, bool router);

// Sends [routing id][signature][command][body]; routing id only when non-empty. Returns false
// when the message could not be queued (peer gone, high-water mark).
// `payload`: a fourth frame after the body (stage_batch's rows).
bool send_raw(zmq::socket_t& s, std::string_view routing_id, wire::command cmd,
              std::string_view body, std::optional<std::string_view> payload = std::nullopt);

template <class M>
bool send(zmq::socket_t& s, std::string_view routing_id, const M& m) {
  return send_raw(s, routing_id, M::cmd, wire::encode(m));
}

// zmq::poll that returns (nothing ready) when a signal interrupts it, so that a SIGTERM handler
// setting a stop flag is seen by the loop instead of surfacing as an exception.
void poll(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout);

// Milliseconds since the Unix epoch (for records) and a monotonic clock (for timers).
int64_t wall_ms();
using steady = std::chrono::steady_clock;

}  // namespace hearth::net
