// The messages of one turn: every reply, event and token chunk the broker's parts send is queued
// here and handed to ZeroMQ (or the outboxes, peer-outbox.h) only after the turn's transaction
// commits (broker.cpp send_turn_output), so that nothing is told before it is durable. A turn
// whose commit fails discards them (clear()).
//
// A peer whose messages of this turn and outbox together pass twice max_peer_outbox_bytes
// (ZeroMQ takes a part of them when the peer reads) gets no more this turn and is dropped at the
// start of the next (to_drop()).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "broker/peer-outbox.h"
#include "schema/codec.h"
#include "schema/messages.h"

namespace hearth::broker {

class turn_output {
 public:
  struct outgoing {
    std::string routing_id;
    wire::command cmd;
    std::string body;
  };
  // What queued_to() says of a peer that gets nothing more this turn.
  static constexpr uint64_t k_peer_dropped = UINT64_MAX;

  turn_output(uint64_t max_peer_outbox_bytes, const peer_outboxes& outboxes)
      : max_peer_outbox_bytes_(max_peer_outbox_bytes), outboxes_(outboxes) {}

  template <class M>
  void send(const std::string& routing_id, const M& m) {
    queue_out(routing_id, M::cmd, wire::encode(m));
  }
  void send_error(const std::string& routing_id, uint64_t request_id, wire::error_code code,
                  std::string message);
  void queue_out(const std::string& routing_id, wire::command cmd, std::string body);

  // The bytes queued to a peer this turn (k_peer_dropped once it gets nothing more).
  uint64_t queued_to(const std::string& routing_id) { return turn_bytes_[routing_id]; }
  // Whether the peer passed its bound this turn (its messages are ignored till the drop).
  bool dropped_this_turn(const std::string& routing_id) const;
  bool any_queued_to() const { return !turn_bytes_.empty(); }

  std::vector<outgoing>& messages() { return out_; }
  // After the messages were handed on, or when the turn's commit failed.
  void clear() {
    out_.clear();
    turn_bytes_.clear();
  }
  // Peers to drop at the start of the next turn.
  std::vector<peer_outboxes::overflow>& to_drop() { return to_drop_; }

  // Client requests handled this turn (routing id, request id): answered storage_unavailable
  // when the turn's commit fails.
  void note_request(const std::string& routing_id, uint64_t request_id) {
    requests_.emplace_back(routing_id, request_id);
  }
  const std::vector<std::pair<std::string, uint64_t>>& requests() const { return requests_; }
  void new_turn() { requests_.clear(); }

 private:
  uint64_t max_peer_outbox_bytes_;
  const peer_outboxes& outboxes_;
  std::vector<outgoing> out_;
  std::unordered_map<std::string, uint64_t> turn_bytes_;  // queued this turn, by routing id
  std::vector<peer_outboxes::overflow> to_drop_;
  std::vector<std::pair<std::string, uint64_t>> requests_;
};

}  // namespace hearth::broker
