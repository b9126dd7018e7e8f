// One send on the broker's ROUTER that never blocks, and what became of it. Shared by the
// outboxes (messages) and the pipe counts (heartbeats that ask a peer to read).
#pragma once

#include <string_view>
#include <zmq.hpp>

#include "schema/messages.h"

namespace hearth::broker {

enum class send_status {
  sent,
  would_block,  // the peer's pipe is at its high-water mark (EAGAIN)
  unreachable,  // no such peer (EHOSTUNREACH: it disconnected)
};

// Sends [routing id][signature][command][body] on a ROUTER with ZMQ_ROUTER_MANDATORY without
// blocking. Only the routing-id frame can be refused: the rest of a multipart message always
// follows once its first frame is queued.
send_status router_send(zmq::socket_t& router, std::string_view routing_id, wire::command cmd,
                        std::string_view body);

}  // namespace hearth::broker
