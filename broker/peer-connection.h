// The connection a peer's messages come over, so that the broker can end it. A ROUTER cannot
// disconnect one peer, and what ZeroMQ's pipe holds for a peer that stopped reading is freed only
// when its connection ends: a dropped peer that never reads would otherwise keep its share of
// the broker's memory (PROTOCOL.md section 10.6) for as long as it stays connected.
//
// The descriptor comes from a received message (ZMQ_SRCFD) and is shut down, never closed:
// libzmq owns it, sees the connection end, frees the peer's pipe and closes it. Its socket's
// inode, noted with it, tells whether the number still names that connection.
#pragma once

#include <sys/types.h>

#include <zmq.hpp>

namespace hearth::broker {

struct peer_connection {
  int fd = -1;  // -1: none (inproc), or unknown
  ino_t inode = 0;
};

// The connection `frame` (a frame of a message received on the ROUTER) came over.
peer_connection peer_connection_of(zmq::message_t& frame);

// Ends the connection (shutdown(2) both ways). False when there is none or the descriptor no
// longer names it (the connection had ended).
bool peer_connection_close(const peer_connection& c);

}  // namespace hearth::broker
