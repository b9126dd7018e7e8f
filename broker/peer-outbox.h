// Messages the broker could not hand to ZeroMQ yet, per peer, with their bytes counted, so that a
// peer that stops reading costs the broker a bounded amount of memory (broker.h: "Sending").
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
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

struct outbox_limits {
  uint64_t max_peer_bytes = 8 << 20;
  uint64_t max_total_bytes = 256 << 20;
  std::chrono::milliseconds max_stall{10000};
};

class peer_outboxes {
 public:
  using clock = std::chrono::steady_clock;
  explicit peer_outboxes(outbox_limits limits) : limits_(limits) {}

  // Sends now, or queues behind what already waits for this peer (order is kept per peer).
  // Returns false when the message was dropped because the peer is gone.
  bool send(zmq::socket_t& router, const std::string& routing_id, wire::command cmd,
            std::string body, clock::time_point now);
  // Retries every waiting message, oldest first per peer, until its peer blocks again.
  void flush(zmq::socket_t& router, clock::time_point now);

  // A peer over a limit, and which one: its outbox has been freed.
  struct overflow {
    std::string routing_id;
    std::string why;
  };
  // Peers over their byte limit or blocked longer than the stall limit, then, while all outboxes
  // together are over the total limit, the peer holding the most. Their outboxes are freed.
  std::vector<overflow> take_overflowing(clock::time_point now);

  // Frees the peer's outbox (nothing when it has none).
  void drop(const std::string& routing_id);

  bool empty() const { return peers_.empty(); }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t bytes_of(const std::string& routing_id) const;

 private:
  struct message {
    wire::command cmd;
    std::string body;
  };
  struct peer {
    std::deque<message> queue;
    uint64_t bytes = 0;
    clock::time_point blocked_since;  // when its oldest waiting message was last refused or sent
  };
  void free_peer(std::unordered_map<std::string, peer>::iterator it);

  outbox_limits limits_;
  std::unordered_map<std::string, peer> peers_;  // only peers with something waiting
  uint64_t total_bytes_ = 0;
};

}  // namespace hearth::broker
