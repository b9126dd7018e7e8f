#include "broker/peer-outbox.h"

#include <algorithm>

#include "schema/zmq-io.h"

namespace hearth::broker {
namespace {

// A message's cost: its body and the frames around it.
uint64_t message_bytes(const std::string& body) {
  return body.size() + 64;
}

// A peer that room() found without room is taken as still waiting for this long after it last
// asked (room() is asked every turn while a watcher lags, turns are at most 100 ms apart).
constexpr std::chrono::seconds k_starved_forgotten{1};

// Peers asked to read per turn when the total is used up (each costs up to pipe_messages
// heartbeats the first time, one after), and how long one has to read before it is dropped.
constexpr int k_shed_probes = 16;
constexpr std::chrono::seconds k_shed_grace{1};

const std::string& heartbeat_body() {
  static const std::string body = wire::encode(wire::heartbeat{});
  return body;
}

}  // namespace

send_status router_send(zmq::socket_t& router, std::string_view routing_id, wire::command cmd,
                        std::string_view body) {
  try {
    if (!net::send_part(router, zmq::buffer(routing_id),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return send_status::would_block;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return send_status::unreachable;
    throw;
  }
  const char code = char(uint8_t(cmd));
  net::send_part(router, zmq::buffer(wire::signature), zmq::send_flags::sndmore);
  net::send_part(router, zmq::buffer(&code, 1), zmq::send_flags::sndmore);
  net::send_part(router, zmq::buffer(body), zmq::send_flags::none);
  return send_status::sent;
}

bool peer_outboxes::send(zmq::socket_t& router, const std::string& routing_id, wire::command cmd,
                         std::string body, clock::time_point now) {
  auto it = peers_.find(routing_id);
  if (it == peers_.end()) {
    switch (send_counted(router, routing_id, cmd, body, now)) {
      case send_status::sent:
        return true;
      case send_status::unreachable:
        return false;
      case send_status::would_block:
        it = peers_.try_emplace(routing_id).first;
        it->second.blocked_since = now;
        break;
    }
  }
  const uint64_t bytes = message_bytes(body);
  it->second.queue.push_back({cmd, std::move(body)});
  it->second.bytes += bytes;
  total_bytes_ += bytes;
  return true;
}

void peer_outboxes::flush(zmq::socket_t& router, clock::time_point now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    peer& p = it->second;
    bool gone = false;
    while (!p.queue.empty()) {
      const message& m = p.queue.front();
      const auto w = pipes_.find(it->first);
      const uint64_t sends_before = w == pipes_.end() ? 0 : w->second.sends;
      const send_status s = send_counted(router, it->first, m.cmd, m.body, now);
      if (s == send_status::would_block) {
        // Heartbeats it took make room: it reads, so the stall clock restarts.
        const auto after = pipes_.find(it->first);
        if (after != pipes_.end() && after->second.sends > sends_before) p.blocked_since = now;
        break;
      }
      if (s == send_status::unreachable) {
        gone = true;
        break;
      }
      const uint64_t bytes = message_bytes(m.body);
      p.bytes -= bytes;
      total_bytes_ -= bytes;
      p.queue.pop_front();
      p.blocked_since = now;  // it reads: the stall clock restarts
    }
    if (gone || p.queue.empty()) {
      auto next = std::next(it);
      free_peer(it);
      it = next;
    } else {
      ++it;
    }
  }
  // A peer's counted bytes are forgotten once later sends push them out; one that is sent nothing
  // more may have gone away. A heartbeat finds out (and counts as a send when it is taken).
  std::vector<std::string> idle;
  for (const auto& [routing_id, w] : pipes_) {
    if (now - w.last_send >= limits_.max_stall && !peers_.contains(routing_id))
      idle.push_back(routing_id);
  }
  for (const std::string& routing_id : idle) {
    switch (router_send(router, routing_id, wire::command::heartbeat, heartbeat_body())) {
      case send_status::sent:
        count_send(routing_id, 0, now);
        break;
      case send_status::would_block:
        pipes_[routing_id].last_send = now;  // asked again after max_stall
        break;
      case send_status::unreachable:
        erase_pipe(routing_id);
        break;
    }
  }
  // Connections being closed hold their count until ZeroMQ has let go of their pipes.
  for (auto it = closing_.begin(); it != closing_.end();) {
    const std::string& routing_id = *it;
    const send_status s =
        pipes_.contains(routing_id)
            ? router_send(router, routing_id, wire::command::heartbeat, heartbeat_body())
            : send_status::unreachable;
    if (s == send_status::sent) count_send(routing_id, 0, now);
    if (s == send_status::unreachable) erase_pipe(routing_id);
    it = pipes_.contains(routing_id) ? std::next(it) : closing_.erase(it);
  }
  if (room_wanted_ || held_bytes() > limits_.max_total_bytes) shed(router, now);
  room_wanted_ = false;
}

void peer_outboxes::shed(zmq::socket_t& router, clock::time_point now) {
  // Room for one peer's worth again when someone waits for it; else back within the total.
  const uint64_t target = room_wanted_ ? limits_.max_total_bytes - std::min(limits_.max_total_bytes,
                                                                            limits_.max_peer_bytes)
                                       : limits_.max_total_bytes;
  // What the peers dropped here hold, and those being closed: freed when their connections end.
  uint64_t dropped = 0;
  for (const std::string& routing_id : closing_) dropped += pipe_bytes_of(routing_id);
  std::unordered_set<std::string> asked = closing_;
  for (int i = 0; i < k_shed_probes && held_bytes() - dropped > target; ++i) {
    std::string most;
    uint64_t most_bytes = 0;
    const auto consider = [&](const std::string& routing_id) {
      const uint64_t b = bytes_of(routing_id) + pipe_bytes_of(routing_id);
      if (b > most_bytes && !asked.contains(routing_id)) {
        most_bytes = b;
        most = routing_id;
      }
    };
    for (const auto& [routing_id, w] : pipes_) consider(routing_id);
    for (const auto& [routing_id, p] : peers_) consider(routing_id);
    if (most_bytes == 0) break;
    asked.insert(most);
    if (!peers_.contains(most)) {
      // Heartbeats push its counted bytes out for as long as its pipe takes them.
      send_status s = send_status::sent;
      while (s == send_status::sent && pipe_bytes_of(most) > 0) {
        s = router_send(router, most, wire::command::heartbeat, heartbeat_body());
        if (s == send_status::sent) count_send(most, 0, now);
        if (s == send_status::unreachable) erase_pipe(most);
      }
      if (pipe_bytes_of(most) == 0) {  // it reads, or it has gone
        shed_asked_.erase(most);
        continue;
      }
    }
    // It has k_shed_grace to read; one whose count went down since is asked again later (no
    // catch-up adds to it while the total is wanted).
    const uint64_t held = bytes_of(most) + pipe_bytes_of(most);
    const auto [a, first] = shed_asked_.try_emplace(most, now, held);
    if (first) continue;
    if (held < a->second.second) {
      a->second = {now, held};
      continue;
    }
    if (now - a->second.first < k_shed_grace) continue;
    shed_asked_.erase(a);
    dropped += held;
    shed_.push_back({most, std::to_string(held) +
                               " bytes held and not reading for a second, the most while all "
                               "peers together hold max_outbox_bytes (" +
                               std::to_string(limits_.max_total_bytes) + ")"});
  }
}

uint64_t peer_outboxes::total_room() const {
  return held_bytes() >= limits_.max_total_bytes ? 0 : limits_.max_total_bytes - held_bytes();
}

uint64_t peer_outboxes::room(zmq::socket_t& router, const std::string& routing_id, uint64_t want,
                             clock::time_point now) {
  if (peers_.contains(routing_id)) return 0;
  const uint64_t asked = std::clamp<uint64_t>(want, k_small_message_bytes, limits_.max_peer_bytes);
  const send_status s = make_room(router, routing_id, asked, now);
  if (s == send_status::unreachable) return 0;
  const auto w = pipes_.find(routing_id);
  if (w == pipes_.end()) return limits_.max_peer_bytes;
  if (s == send_status::would_block) {
    // Each send ZeroMQ takes restarts the clock (count_send).
    if (!w->second.starved_since) w->second.starved_since = now;
    w->second.starved_last = now;
  }
  const uint64_t held = w->second.bytes;
  return held >= limits_.max_peer_bytes ? 0 : limits_.max_peer_bytes - held;
}

send_status peer_outboxes::send_counted(zmq::socket_t& router, const std::string& routing_id,
                                        wire::command cmd, const std::string& body,
                                        clock::time_point now) {
  const uint64_t bytes = message_bytes(body);
  if (const send_status s = make_room(router, routing_id, bytes, now); s != send_status::sent)
    return s;
  const send_status s = router_send(router, routing_id, cmd, body);
  if (s == send_status::sent) count_send(routing_id, bytes, now);
  if (s == send_status::unreachable) erase_pipe(routing_id);
  return s;
}

send_status peer_outboxes::make_room(zmq::socket_t& router, const std::string& routing_id,
                                     uint64_t bytes, clock::time_point now) {
  while (!fits(routing_id, bytes)) {
    const send_status s =
        router_send(router, routing_id, wire::command::heartbeat, heartbeat_body());
    if (s == send_status::unreachable) erase_pipe(routing_id);
    if (s != send_status::sent) return s;
    count_send(routing_id, 0, now);
  }
  return send_status::sent;
}

void peer_outboxes::count_send(const std::string& routing_id, uint64_t bytes,
                               clock::time_point now) {
  const bool counted = bytes >= k_small_message_bytes;
  auto it = pipes_.find(routing_id);
  if (it == pipes_.end()) {
    if (!counted) return;  // nothing of its is counted: an uncounted send changes nothing
    it = pipes_.try_emplace(routing_id).first;
  }
  pipe_window& w = it->second;
  ++w.sends;
  w.last_send = now;
  w.starved_since.reset();  // its pipe moved
  if (counted) {
    w.counted.emplace_back(w.sends, bytes);
    w.bytes += bytes;
    total_pipe_bytes_ += bytes;
  }
  forget_old(w);
  if (w.counted.empty()) pipes_.erase(it);
}

void peer_outboxes::forget_old(pipe_window& w) {
  // ZeroMQ took send number `sends`, so the pipe holds at most the last pipe_messages sends.
  while (!w.counted.empty() && w.counted.front().first + limits_.pipe_messages <= w.sends) {
    w.bytes -= w.counted.front().second;
    total_pipe_bytes_ -= w.counted.front().second;
    w.counted.pop_front();
  }
}

void peer_outboxes::erase_pipe(const std::string& routing_id) {
  auto it = pipes_.find(routing_id);
  if (it == pipes_.end()) return;
  total_pipe_bytes_ -= it->second.bytes;
  pipes_.erase(it);
  shed_asked_.erase(routing_id);
}

bool peer_outboxes::fits(const std::string& routing_id, uint64_t bytes) const {
  if (bytes < k_small_message_bytes) return true;
  const uint64_t held = pipe_bytes_of(routing_id);
  // One message larger than the limit alone still goes, once nothing counted is held.
  return held == 0 || held + bytes <= limits_.max_peer_bytes;
}

std::vector<peer_outboxes::overflow> peer_outboxes::take_overflowing(clock::time_point now) {
  std::vector<overflow> out = std::move(shed_);
  shed_.clear();
  for (const overflow& o : out) drop(o.routing_id);
  for (auto it = peers_.begin(); it != peers_.end();) {
    const peer& p = it->second;
    std::string why;
    if (p.bytes > limits_.max_peer_bytes) {
      why = std::to_string(p.bytes) + " bytes unsent, over max_peer_outbox_bytes (" +
            std::to_string(limits_.max_peer_bytes) + ")";
    } else if (now - p.blocked_since > limits_.max_stall) {
      why = "not reading for over peer_stall_ms (" + std::to_string(limits_.max_stall.count()) +
            " ms)";
    }
    if (why.empty()) {
      ++it;
      continue;
    }
    out.push_back({it->first, std::move(why)});
    auto next = std::next(it);
    free_peer(it);
    it = next;
  }
  for (auto& [routing_id, w] : pipes_) {
    if (!w.starved_since) continue;
    // Nothing asks for room for it any more (a watch ended): it is not waiting.
    if (now - w.starved_last > k_starved_forgotten) w.starved_since.reset();
    if (!w.starved_since || now - *w.starved_since <= limits_.max_stall) continue;
    w.starved_since.reset();  // reported once; its pipe's count stays
    out.push_back({routing_id, "not reading for over peer_stall_ms (" +
                                   std::to_string(limits_.max_stall.count()) +
                                   " ms) while it waits for room"});
  }
  while (total_bytes_ > limits_.max_total_bytes) {
    auto largest = std::max_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
      return a.second.bytes < b.second.bytes;
    });
    out.push_back({largest->first, std::to_string(largest->second.bytes) +
                                       " bytes unsent, the most while all peers' unsent messages "
                                       "are over max_outbox_bytes (" +
                                       std::to_string(limits_.max_total_bytes) + ")"});
    free_peer(largest);
  }
  return out;
}

uint64_t peer_outboxes::bytes_of(const std::string& routing_id) const {
  auto it = peers_.find(routing_id);
  return it == peers_.end() ? 0 : it->second.bytes;
}

uint64_t peer_outboxes::pipe_bytes_of(const std::string& routing_id) const {
  auto it = pipes_.find(routing_id);
  return it == pipes_.end() ? 0 : it->second.bytes;
}

void peer_outboxes::drop(const std::string& routing_id) {
  if (auto it = peers_.find(routing_id); it != peers_.end()) free_peer(it);
  shed_asked_.erase(routing_id);
}

void peer_outboxes::closing(const std::string& routing_id) {
  drop(routing_id);
  if (auto w = pipes_.find(routing_id); w != pipes_.end()) {
    w->second.starved_since.reset();  // dropped already
    closing_.insert(routing_id);
  }
}

void peer_outboxes::forget(const std::string& routing_id) {
  drop(routing_id);
  erase_pipe(routing_id);
  closing_.erase(routing_id);
}

void peer_outboxes::free_peer(std::unordered_map<std::string, peer>::iterator it) {
  total_bytes_ -= it->second.bytes;
  peers_.erase(it);
}

}  // namespace hearth::broker
