// Messages the broker could not hand to ZeroMQ yet, per peer, with their bytes counted, so that a
// peer that stops reading costs the broker a bounded amount of memory (broker.h: "Sending").
//
// A peer's outbox holds at most max_peer_bytes, and so may its ZeroMQ pipe: what the pipe may
// hold is counted by peer_pipes (peer-pipes.h), and a message that does not fit it waits here.
//
// All peers together hold at most max_total_bytes: their outboxes and their counted pipe bytes
// (500 watchers of a 6 MiB output that never read held 1.9 GiB in their pipes, issue 52). Those
// catching up share what the total has left (total_room()); when it is used up and someone
// waits for it, or it is passed, the peers holding the most are asked to read (with heartbeats,
// peer_pipes::ask_to_read), and one whose count has not gone down a second later is dropped
// (take_overflowing); the broker then ends its connection, which frees its pipe
// (peer-connection.h; closing()), and its count is kept until ZeroMQ says the peer is gone, so
// that the room is given again only once it is free.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "broker/peer-pipes.h"
#include "broker/router-send.h"
#include "schema/messages.h"

namespace hearth::broker {

struct outbox_limits {
  // A peer's outbox, and again what its ZeroMQ pipe may hold in messages of k_small_message_bytes
  // or more.
  uint64_t max_peer_bytes = 8 << 20;
  uint64_t max_total_bytes = 256 << 20;
  std::chrono::milliseconds max_stall{10000};
  uint64_t pipe_messages = 1024;  // the ROUTER's ZMQ_SNDHWM
};

class peer_outboxes {
 public:
  using clock = std::chrono::steady_clock;
  explicit peer_outboxes(outbox_limits limits)
      : limits_(limits), pipes_(limits.max_peer_bytes, limits.pipe_messages, limits.max_stall) {}

  // Sends now, or queues behind what already waits for this peer (order is kept per peer).
  // Returns false when the message was dropped because the peer is gone.
  bool send(zmq::socket_t& router, const std::string& routing_id, wire::command cmd,
            std::string body, clock::time_point now);
  // Retries every waiting message, oldest first per peer, until its peer blocks again; probes
  // peers that hold counted bytes and were sent nothing for max_stall, to forget those gone.
  void flush(zmq::socket_t& router, clock::time_point now);

  // Bytes the peer can be sent now without waiting in its outbox (0 while it has messages
  // waiting). Asks the peer's pipe with heartbeats, as a send would, for up to `want`.
  uint64_t room(zmq::socket_t& router, const std::string& routing_id, uint64_t want,
                clock::time_point now);

  // A peer over a limit, and which one: its outbox has been freed.
  struct overflow {
    std::string routing_id;
    std::string why;
  };
  // Peers over their byte limit or blocked longer than the stall limit (their outbox not
  // moving, or room() finding no room), then, while all outboxes together are over the total
  // limit, the peer holding the most. Their outboxes are freed.
  std::vector<overflow> take_overflowing(clock::time_point now);

  // Frees the peer's outbox (nothing when it has none). What its pipe holds is still counted.
  void drop(const std::string& routing_id);
  // The peer's connection is being closed: its outbox is freed, and its pipe's count is kept
  // until a heartbeat (one a turn) finds it gone.
  void closing(const std::string& routing_id);
  // The peer's connection cannot be closed: its outbox is freed and its pipe's count forgotten.
  void forget(const std::string& routing_id);

  // What all peers together may still be given: max_total_bytes less their outboxes and counted
  // pipe bytes.
  uint64_t total_room() const;
  // Someone found total_room() too small: the next flush() asks the peers holding the most to
  // read, and drops one that does not.
  void want_room() { room_wanted_ = true; }
  // Outboxes and counted pipe bytes of all peers.
  uint64_t held_bytes() const { return total_bytes_ + pipes_.total(); }

  bool empty() const { return peers_.empty(); }
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t bytes_of(const std::string& routing_id) const;
  // The counted bytes its ZeroMQ pipe may still hold.
  uint64_t pipe_bytes_of(const std::string& routing_id) const {
    return pipes_.bytes_of(routing_id);
  }

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
  // A peer found gone: it is not asked to read any more.
  void gone(const std::string& routing_id) { shed_asked_.erase(routing_id); }
  // The total is used up and wanted, or passed: the peers holding the most are asked to read
  // (heartbeats push their counted bytes out), at most k_shed_probes a turn, and those whose
  // count has not gone down a second after they were asked are noted in shed_ for
  // take_overflowing.
  void shed(zmq::socket_t& router, clock::time_point now);

  outbox_limits limits_;
  std::unordered_map<std::string, peer> peers_;  // only peers with something waiting
  uint64_t total_bytes_ = 0;
  peer_pipes pipes_;
  bool room_wanted_ = false;
  // Peers shed() asked to read: since when, and what they held then.
  std::unordered_map<std::string, std::pair<clock::time_point, uint64_t>> shed_asked_;
  std::vector<overflow> shed_;  // dropped by shed(), reported by take_overflowing
};

}  // namespace hearth::broker
