#include "broker/turn-output.h"

namespace hearth::broker {

void turn_output::send_error(const std::string& rid, uint64_t request_id, wire::error_code code,
                             std::string message) {
  wire::error_reply e;
  e.request_id = request_id;
  e.code = code;
  e.message = std::move(message);
  send(rid, e);
}

void turn_output::queue_out(const std::string& rid, wire::command cmd, std::string body) {
  uint64_t& bytes = turn_bytes_[rid];
  if (bytes == k_peer_dropped) return;
  bytes += body.size();
  const uint64_t limit = 2 * max_peer_outbox_bytes_;
  if (bytes + outboxes_.bytes_of(rid) > limit) {
    bytes = k_peer_dropped;
    to_drop_.push_back({rid, "its messages of one turn and its unsent ones passed " +
                                 std::to_string(limit) + " bytes (twice max_peer_outbox_bytes)"});
    return;
  }
  out_.push_back({rid, cmd, std::move(body)});
}

bool turn_output::dropped_this_turn(const std::string& rid) const {
  auto it = turn_bytes_.find(rid);
  return it != turn_bytes_.end() && it->second == k_peer_dropped;
}

}  // namespace hearth::broker
