// The broker's timers (turn-timers.h).
#include "broker/turn-timers.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace hearth::broker {

void turn_timers::start(net::steady::time_point now) {
  next_tick_ = now;
  next_flush_ = now + std::chrono::milliseconds(cfg_.output_flush_ms);
  next_positions_ = now + std::chrono::milliseconds(cfg_.queue_position_ms);
}

net::steady::time_point turn_timers::next_due() const {
  return std::min({next_tick_, next_flush_, next_positions_});
}

void turn_timers::run(net::steady::time_point now) {
  const bool storage_down = storage_.down(now);
  if (now >= next_tick_) {
    // Twice per interval, so a heartbeat goes out within one interval of the last message
    // whatever the phase, and a dead node is noticed within half an interval of its deadline.
    next_tick_ = now + std::chrono::milliseconds(std::max<uint32_t>(cfg_.heartbeat_ms / 2, 1));
    if (nodes_.quarantine_timers(now)) jobs_.dispatch_later();
    report_.prune_peers(now);
    nodes_.liveness(now, storage_down,
                    [&](node_entry& n, const std::string& why) { attempts_.node_lost(n, why); });
    attempts_.timers(now);
    jobs_.attempt_timers(now);
    placement_.timers(now);
    // Its notes go to the jobs' history, which waits while the store refuses writes.
    if (cfg_.auto_place && !storage_down) {
      placement_.auto_place(
          jobs_.queues(), [&](const std::string& model) { return nodes_.waiting_reason(model); },
          [&](uint64_t id, const std::string& detail) { jobs_.note(id, "waiting", detail); });
    }
  }
  // While the store refuses writes, output waits in memory (it is flushed once writes work).
  if (now >= next_flush_ && !storage_down) {
    next_flush_ = now + std::chrono::milliseconds(cfg_.output_flush_ms);
    jobs_.flush_all();
  }
  if (!storage_down) history_.prune_step(now);
  if (now >= next_positions_) {
    next_positions_ = now + std::chrono::milliseconds(cfg_.queue_position_ms);
    relay_.queue_positions(jobs_.queues(), jobs_.jobs(),
                           [&](const std::string& model) { return nodes_.waiting_reason(model); });
  }
}

}  // namespace hearth::broker
