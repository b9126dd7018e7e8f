// The ZAP handler (RFC 27) of a node's peer sockets, the transfer socket and the stage socket:
// any CURVE key may connect (the handshake proves the peer holds it), and the key, in Z85, becomes
// the User-Id of every message the connection carries. What a key may do is then the socket's
// own decision (a transfer ticket, a pipeline's neighbour). Each server binds its own ZAP socket
// in its own ZeroMQ context, so that two servers of a process answer for their own keys.
#pragma once

#include <zmq.hpp>

namespace hearth::net {

// The ZAP socket of `ctx` (a REP on "inproc://zeromq.zap.01"): bound before the server socket
// accepts its first connection.
zmq::socket_t zap_bind(zmq::context_t& ctx);

// Answers the ZAP requests waiting on `zap` (at most `max`), without blocking.
void zap_answer_any_curve_key(zmq::socket_t& zap, int max = 64);

}  // namespace hearth::net
