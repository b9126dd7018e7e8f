#include "broker/peer-outbox.h"

#include <algorithm>

#include "schema/zmq-io.h"

namespace hearth::broker {
namespace {

// A message's cost: its body and the frames around it.
uint64_t message_bytes(const std::string& body) {
  return body.size() + 64;
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
    switch (router_send(router, routing_id, cmd, body)) {
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
      const send_status s = router_send(router, it->first, m.cmd, m.body);
      if (s == send_status::would_block) break;
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
}

std::vector<peer_outboxes::overflow> peer_outboxes::take_overflowing(clock::time_point now) {
  std::vector<overflow> out;
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
}

void peer_outboxes::free_peer(std::unordered_map<std::string, peer>::iterator it) {
  total_bytes_ -= it->second.bytes;
  peers_.erase(it);
}

}  // namespace hearth::broker
