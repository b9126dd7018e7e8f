// A node as the broker knows it (node-entry.h).
#include "broker/node-entry.h"

namespace hearth::broker {

bool node_entry::serves(const std::string& model) const {
  for (const auto& m : models) {
    if (m.name == model) return true;
  }
  return false;
}

bool node_entry::can_hold(const std::string& model) const {
  for (const auto& m : models) {
    if (m.name == model) return m.layout.whole_bytes == 0 || m.layout.whole_bytes <= capacity();
  }
  return false;
}

bool node_entry::has_loaded(const std::string& model) const {
  for (const auto& m : models) {
    if (m.name == model) return m.loaded;
  }
  return false;
}

uint64_t node_entry::speed_rank() const {
  return (hardware.gpus.empty() ? 0 : uint64_t(1) << 32) + hardware.cpu_threads;
}

uint32_t node_entry::losses_since(net::steady::time_point since) const {
  return uint32_t(recent_losses.end() -
                  std::lower_bound(recent_losses.begin(), recent_losses.end(), since));
}

uint32_t node_entry::free_slots() const {
  return slots - std::min<uint32_t>(uint32_t(running.size()), slots);
}

void node_entry::measure(uint32_t n_gen, double seconds) {
  const double rate = double(n_gen) / std::max(seconds, 0.001);
  measured_rate = completed == 0 ? rate : 0.75 * measured_rate + 0.25 * rate;
  ++completed;
}

wire::node_summary node_entry::summary() const {
  wire::node_summary s;
  s.name = name;
  s.hostname = hostname;
  s.engine = engine;
  s.online = online;
  s.last_seen_ms = last_seen_ms;
  s.slots = slots;
  s.running = uint32_t(running.size());
  s.hardware = hardware;
  s.models = models;
  s.quarantined_until_ms = quarantined(net::steady::now()) ? quarantined_until_ms : 0;
  s.lost = lost;
  s.losses.assign(last_losses.begin(), last_losses.end());
  s.key = key;
  return s;
}

void node_entry::count_tokens(net::steady::time_point now, uint64_t n) {
  const int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (!recent_tokens.empty() && recent_tokens.back().first == second) {
    recent_tokens.back().second += n;
  } else {
    recent_tokens.emplace_back(second, n);
  }
  while (!recent_tokens.empty() && recent_tokens.front().first <= second - k_rate_window_s) {
    recent_tokens.pop_front();
  }
}

double node_entry::tokens_per_second(net::steady::time_point now) const {
  const int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  uint64_t total = 0;
  for (const auto& [s, n] : recent_tokens) {
    if (s > second - k_rate_window_s) total += n;
  }
  return double(total) / k_rate_window_s;
}

}  // namespace hearth::broker
