// The bytes each peer's ZeroMQ pipe may hold, counted, so that the outboxes (peer-outbox.h) can
// bound a peer in bytes and not only in messages. Kept apart from the outboxes because it is
// different state: what ZeroMQ already took, not what waits for it.
//
// ZeroMQ bounds what it holds for a peer in messages (ZMQ_SNDHWM), not bytes: 1024 pages of
// output are 256 MiB. A send that ZeroMQ accepts proves that the pipe holds at most
// `pipe_messages` messages, the newest ones: the bytes of a peer's last `pipe_messages` sends
// bound what its pipe holds. A message that would take that past max_peer_bytes waits, and the
// peer is first sent empty heartbeats (which every peer ignores, PROTOCOL.md section 9.4): each
// one ZeroMQ accepts pushes one older message out of the count, and a peer that does not read
// stops accepting them. A peer sent nothing for a while, or whose connection is being closed,
// is sent a heartbeat now and then, and its count forgotten once ZeroMQ says it is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "broker/router-send.h"

namespace hearth::broker {

// Messages smaller than this are not counted against a pipe's bytes (there is no need: the pipe
// holds at most pipe_messages of them), so that token chunks cost no bookkeeping.
inline constexpr uint64_t k_small_message_bytes = 1024;

// A message's cost: its body and the frames around it.
inline uint64_t message_bytes(const std::string& body) {
  return body.size() + 64;
}

class peer_pipes {
 public:
  using clock = std::chrono::steady_clock;
  // max_peer_bytes: what one pipe may hold in counted messages; pipe_messages: the ROUTER's
  // ZMQ_SNDHWM; max_stall: how long a peer sent nothing is left before a heartbeat asks.
  peer_pipes(uint64_t max_peer_bytes, uint64_t pipe_messages, std::chrono::milliseconds max_stall)
      : max_peer_bytes_(max_peer_bytes), pipe_messages_(pipe_messages), max_stall_(max_stall) {}

  // Sends one message if its bytes fit the peer's pipe (asking with heartbeats as needed) and
  // ZeroMQ takes it, and counts it. A peer found gone is forgotten.
  send_status send(zmq::socket_t& router, const std::string& routing_id, wire::command cmd,
                   const std::string& body, clock::time_point now);
  // Bytes the peer's pipe can be given now, asking it with heartbeats for up to `want`; nullopt
  // when the peer is gone. Finding no room starts its waiting-for-room clock (take_starved).
  std::optional<uint64_t> room(zmq::socket_t& router, const std::string& routing_id, uint64_t want,
                               clock::time_point now);
  // Heartbeats to the peer for as long as its pipe takes them; returns the bytes still counted
  // (0 when it reads, or has gone).
  uint64_t ask_to_read(zmq::socket_t& router, const std::string& routing_id, clock::time_point now);
  // A heartbeat to each peer with a count that was sent nothing for max_stall (unless `waiting`:
  // the outboxes send to those) and to each whose connection is being closed. Returns those found
  // gone, whose counts are forgotten.
  std::vector<std::string> probe(zmq::socket_t& router, clock::time_point now,
                                 const std::function<bool(const std::string&)>& waiting);

  // Peers that waited for room (room() finding none, ZeroMQ taking nothing more) for over
  // max_stall, each reported once. One that nothing asks room for any more is not waiting.
  std::vector<std::string> take_starved(clock::time_point now);

  // The peer's connection is being closed: its count is kept until probe() finds it gone.
  void closing(const std::string& routing_id);
  // The peer's connection cannot be closed: its count is forgotten.
  void forget(const std::string& routing_id);

  // The counted bytes its pipe may still hold.
  uint64_t bytes_of(const std::string& routing_id) const;
  // Messages ZeroMQ took for it since its count was opened (0 without a count).
  uint64_t sends_of(const std::string& routing_id) const;
  // The counted bytes of all pipes.
  uint64_t total() const { return total_; }
  const std::unordered_set<std::string>& closing_peers() const { return closing_; }
  // Calls f(routing_id) for each peer with counted bytes.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [routing_id, w] : windows_) f(routing_id);
  }

 private:
  // A peer's recent sends that count: the pipe holds at most the last pipe_messages sends.
  struct window {
    uint64_t sends = 0;  // messages ZeroMQ accepted for it since the window was opened
    std::deque<std::pair<uint64_t, uint64_t>> counted;  // (send number, bytes), oldest first
    uint64_t bytes = 0;                                 // the sum of `counted`
    clock::time_point last_send;
    // Since when room() finds no room, ZeroMQ taking nothing more (and when it last asked): a
    // peer that waits for room without reading is dropped after max_stall, as one whose outbox
    // does not move.
    std::optional<clock::time_point> starved_since;
    clock::time_point starved_last;
  };
  // Sends heartbeats until `bytes` more fit the peer's pipe; would_block when they do not.
  send_status make_room(zmq::socket_t& router, const std::string& routing_id, uint64_t bytes,
                        clock::time_point now);
  // One heartbeat, counted when taken; the count forgotten when the peer is gone.
  send_status heartbeat(zmq::socket_t& router, const std::string& routing_id,
                        clock::time_point now);
  void count_send(const std::string& routing_id, uint64_t bytes, clock::time_point now);
  void forget_old(window& w);
  void erase(const std::string& routing_id);
  bool fits(const std::string& routing_id, uint64_t bytes) const;

  uint64_t max_peer_bytes_;
  uint64_t pipe_messages_;
  std::chrono::milliseconds max_stall_;
  std::unordered_map<std::string, window> windows_;  // only peers with counted bytes
  uint64_t total_ = 0;                               // the sum of their counts
  std::unordered_set<std::string> closing_;          // peers whose connections are being closed
};

}  // namespace hearth::broker
