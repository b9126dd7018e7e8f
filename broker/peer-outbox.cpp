#include "broker/peer-outbox.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace hearth::broker {
namespace {

// Peers asked to read per turn when the total is used up (each costs up to pipe_messages
// heartbeats the first time, one after), and how long one has to read before it is dropped.
constexpr int k_shed_probes = 16;
constexpr std::chrono::seconds k_shed_grace{1};

}  // namespace

bool peer_outboxes::send(zmq::socket_t& router, const std::string& routing_id, wire::command cmd,
                         std::string body, clock::time_point now) {
  auto it = peers_.find(routing_id);
  if (it == peers_.end()) {
    switch (pipes_.send(router, routing_id, cmd, body, now)) {
      case send_status::sent:
        return true;
      case send_status::unreachable:
        gone(routing_id);
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
    bool is_gone = false;
    while (!p.queue.empty()) {
      const message& m = p.queue.front();
      const uint64_t sends_before = pipes_.sends_of(it->first);
      const send_status s = pipes_.send(router, it->first, m.cmd, m.body, now);
      if (s == send_status::would_block) {
        // Heartbeats it took make room: it reads, so the stall clock restarts.
        if (pipes_.sends_of(it->first) > sends_before) p.blocked_since = now;
        break;
      }
      if (s == send_status::unreachable) {
        gone(it->first);
        is_gone = true;
        break;
      }
      const uint64_t bytes = message_bytes(m.body);
      p.bytes -= bytes;
      total_bytes_ -= bytes;
      p.queue.pop_front();
      p.blocked_since = now;  // it reads: the stall clock restarts
    }
    if (is_gone || p.queue.empty()) {
      auto next = std::next(it);
      free_peer(it);
      it = next;
    } else {
      ++it;
    }
  }
  // Peers with messages waiting were just sent to; the pipes ask the others that went quiet.
  const auto waiting = [&](const std::string& routing_id) { return peers_.contains(routing_id); };
  for (const std::string& routing_id : pipes_.probe(router, now, waiting)) gone(routing_id);
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
  for (const std::string& routing_id : pipes_.closing_peers()) dropped += pipe_bytes_of(routing_id);
  std::unordered_set<std::string> asked = pipes_.closing_peers();
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
    pipes_.for_each(consider);
    for (const auto& [routing_id, p] : peers_) consider(routing_id);
    if (most_bytes == 0) break;
    asked.insert(most);
    // Heartbeats push its counted bytes out for as long as its pipe takes them.
    if (!peers_.contains(most) && pipes_.ask_to_read(router, most, now) == 0) {
      shed_asked_.erase(most);  // it reads, or it has gone
      continue;
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
  const std::optional<uint64_t> r = pipes_.room(router, routing_id, want, now);
  if (!r) gone(routing_id);
  return r.value_or(0);
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
  for (std::string& routing_id : pipes_.take_starved(now)) {
    out.push_back({std::move(routing_id), "not reading for over peer_stall_ms (" +
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

void peer_outboxes::drop(const std::string& routing_id) {
  if (auto it = peers_.find(routing_id); it != peers_.end()) free_peer(it);
  shed_asked_.erase(routing_id);
}

void peer_outboxes::closing(const std::string& routing_id) {
  drop(routing_id);
  pipes_.closing(routing_id);
}

void peer_outboxes::forget(const std::string& routing_id) {
  drop(routing_id);
  pipes_.forget(routing_id);
}

void peer_outboxes::free_peer(std::unordered_map<std::string, peer>::iterator it) {
  total_bytes_ -= it->second.bytes;
  peers_.erase(it);
}

}  // namespace hearth::broker
