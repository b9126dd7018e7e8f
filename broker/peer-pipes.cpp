#include "broker/peer-pipes.h"

#include <algorithm>

#include "schema/codec.h"

namespace hearth::broker {
namespace {

// A peer that room() found without room is taken as still waiting for this long after it last
// asked (room() is asked every turn while a watcher lags, turns are at most 100 ms apart).
constexpr std::chrono::seconds k_starved_forgotten{1};

const std::string& pipe_heartbeat_body() {
  static const std::string body = wire::encode(wire::heartbeat{});
  return body;
}

}  // namespace

send_status peer_pipes::send(zmq::socket_t& router, const std::string& routing_id,
                             wire::command cmd, const std::string& body, clock::time_point now) {
  const uint64_t bytes = message_bytes(body);
  if (const send_status s = make_room(router, routing_id, bytes, now); s != send_status::sent)
    return s;
  const send_status s = router_send(router, routing_id, cmd, body);
  if (s == send_status::sent) count_send(routing_id, bytes, now);
  if (s == send_status::unreachable) erase(routing_id);
  return s;
}

std::optional<uint64_t> peer_pipes::room(zmq::socket_t& router, const std::string& routing_id,
                                         uint64_t want, clock::time_point now) {
  const uint64_t asked = std::clamp<uint64_t>(want, k_small_message_bytes, max_peer_bytes_);
  const send_status s = make_room(router, routing_id, asked, now);
  if (s == send_status::unreachable) return std::nullopt;
  const auto w = windows_.find(routing_id);
  if (w == windows_.end()) return max_peer_bytes_;
  if (s == send_status::would_block) {
    // Each send ZeroMQ takes restarts the clock (count_send).
    if (!w->second.starved_since) w->second.starved_since = now;
    w->second.starved_last = now;
  }
  const uint64_t held = w->second.bytes;
  return held >= max_peer_bytes_ ? 0 : max_peer_bytes_ - held;
}

uint64_t peer_pipes::ask_to_read(zmq::socket_t& router, const std::string& routing_id,
                                 clock::time_point now) {
  send_status s = send_status::sent;
  while (s == send_status::sent && bytes_of(routing_id) > 0) s = heartbeat(router, routing_id, now);
  return bytes_of(routing_id);
}

std::vector<std::string> peer_pipes::probe(zmq::socket_t& router, clock::time_point now,
                                           const std::function<bool(const std::string&)>& waiting) {
  std::vector<std::string> gone;
  // A peer's counted bytes are forgotten once later sends push them out; one that is sent nothing
  // more may have gone away. A heartbeat finds out (and counts as a send when it is taken).
  std::vector<std::string> idle;
  for (const auto& [routing_id, w] : windows_) {
    if (now - w.last_send >= max_stall_ && !waiting(routing_id)) idle.push_back(routing_id);
  }
  for (const std::string& routing_id : idle) {
    const send_status s = heartbeat(router, routing_id, now);
    if (s == send_status::would_block) windows_[routing_id].last_send = now;  // asked again later
    if (s == send_status::unreachable) gone.push_back(routing_id);
  }
  // Connections being closed hold their count until ZeroMQ has let go of their pipes.
  for (auto it = closing_.begin(); it != closing_.end();) {
    const std::string& routing_id = *it;
    if (windows_.contains(routing_id) &&
        heartbeat(router, routing_id, now) == send_status::unreachable)
      gone.push_back(routing_id);
    it = windows_.contains(routing_id) ? std::next(it) : closing_.erase(it);
  }
  return gone;
}

std::vector<std::string> peer_pipes::take_starved(clock::time_point now) {
  std::vector<std::string> out;
  for (auto& [routing_id, w] : windows_) {
    if (!w.starved_since) continue;
    // Nothing asks for room for it any more (a watch ended): it is not waiting.
    if (now - w.starved_last > k_starved_forgotten) w.starved_since.reset();
    if (!w.starved_since || now - *w.starved_since <= max_stall_) continue;
    w.starved_since.reset();  // reported once; its pipe's count stays
    out.push_back(routing_id);
  }
  return out;
}

void peer_pipes::closing(const std::string& routing_id) {
  if (auto w = windows_.find(routing_id); w != windows_.end()) {
    w->second.starved_since.reset();  // dropped already
    closing_.insert(routing_id);
  }
}

void peer_pipes::forget(const std::string& routing_id) {
  erase(routing_id);
  closing_.erase(routing_id);
}

uint64_t peer_pipes::bytes_of(const std::string& routing_id) const {
  auto it = windows_.find(routing_id);
  return it == windows_.end() ? 0 : it->second.bytes;
}

uint64_t peer_pipes::sends_of(const std::string& routing_id) const {
  auto it = windows_.find(routing_id);
  return it == windows_.end() ? 0 : it->second.sends;
}

send_status peer_pipes::make_room(zmq::socket_t& router, const std::string& routing_id,
                                  uint64_t bytes, clock::time_point now) {
  while (!fits(routing_id, bytes)) {
    if (const send_status s = heartbeat(router, routing_id, now); s != send_status::sent) return s;
  }
  return send_status::sent;
}

send_status peer_pipes::heartbeat(zmq::socket_t& router, const std::string& routing_id,
                                  clock::time_point now) {
  const send_status s =
      router_send(router, routing_id, wire::command::heartbeat, pipe_heartbeat_body());
  if (s == send_status::sent) count_send(routing_id, 0, now);
  if (s == send_status::unreachable) erase(routing_id);
  return s;
}

void peer_pipes::count_send(const std::string& routing_id, uint64_t bytes, clock::time_point now) {
  const bool counted = bytes >= k_small_message_bytes;
  auto it = windows_.find(routing_id);
  if (it == windows_.end()) {
    if (!counted) return;  // nothing of its is counted: an uncounted send changes nothing
    it = windows_.try_emplace(routing_id).first;
  }
  window& w = it->second;
  ++w.sends;
  w.last_send = now;
  w.starved_since.reset();  // its pipe moved
  if (counted) {
    w.counted.emplace_back(w.sends, bytes);
    w.bytes += bytes;
    total_ += bytes;
  }
  forget_old(w);
  if (w.counted.empty()) windows_.erase(it);
}

void peer_pipes::forget_old(window& w) {
  // ZeroMQ took send number `sends`, so the pipe holds at most the last pipe_messages sends.
  while (!w.counted.empty() && w.counted.front().first + pipe_messages_ <= w.sends) {
    w.bytes -= w.counted.front().second;
    total_ -= w.counted.front().second;
    w.counted.pop_front();
  }
}

void peer_pipes::erase(const std::string& routing_id) {
  auto it = windows_.find(routing_id);
  if (it == windows_.end()) return;
  total_ -= it->second.bytes;
  windows_.erase(it);
}

bool peer_pipes::fits(const std::string& routing_id, uint64_t bytes) const {
  if (bytes < k_small_message_bytes) return true;
  const uint64_t held = bytes_of(routing_id);
  // One message larger than the limit alone still goes, once nothing counted is held.
  return held == 0 || held + bytes <= max_peer_bytes_;
}

}  // namespace hearth::broker
