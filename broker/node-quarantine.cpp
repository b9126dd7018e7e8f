// The quarantine bookkeeping of a node (node-quarantine.h).
#include "broker/node-quarantine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace hearth::broker {

std::string loss_reason(const std::string& why) {
  constexpr size_t k_max_bytes = 512;
  if (why.size() <= k_max_bytes) return why;
  size_t cut = k_max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(why[cut]) & 0xc0) == 0x80) --cut;
  return why.substr(0, cut) + "...";
}

void count_loss(node_entry& n, const broker_config& cfg, uint64_t job_id, uint32_t attempt,
                const std::string& why, bool handback) {
  ++n.lost;
  n.last_losses.push_back({net::wall_ms(), job_id, attempt, loss_reason(why)});
  if (n.last_losses.size() > node_entry::k_losses_kept) n.last_losses.pop_front();
  const auto now = net::steady::now();
  // Losses while quarantined (attempts it still held) do not extend the quarantine.
  if (n.quarantined(now)) return;
  // A node shutting down hands back all it runs at once: hand-backs within a second of the
  // counted one are one loss, so a restart (systemctl restart) does not quarantine a node, while
  // taking jobs and handing them back again and again still does.
  if (handback) {
    if (now - n.last_handback < std::chrono::seconds(1)) return;
    n.last_handback = now;
  }
  const auto window = std::chrono::milliseconds(cfg.quarantine_window_ms);
  n.recent_losses.push_back(now);
  while (!n.recent_losses.empty() && n.recent_losses.front() < now - window) {
    n.recent_losses.pop_front();
  }
  if (n.recent_losses.size() < cfg.quarantine_after) return;
  // A repeat within the longest quarantine of the last one's end doubles the time.
  const auto max = std::chrono::milliseconds(broker_config::max_quarantine_ms);
  const bool repeat = n.quarantine_level > 0 && now - n.quarantine_end < max;
  n.quarantine_level = repeat ? std::min<uint32_t>(n.quarantine_level + 1, 20) : 1;
  const int64_t ms = std::min<int64_t>(int64_t(cfg.quarantine_ms) << (n.quarantine_level - 1),
                                       broker_config::max_quarantine_ms);
  n.quarantine_end = now + std::chrono::milliseconds(ms);
  n.quarantined_until_ms = net::wall_ms() + ms;
  spdlog::warn("node {} is quarantined for {} s: it lost {} attempts within {} s (last: {})",
               n.name, ms / 1000.0, n.recent_losses.size(), cfg.quarantine_window_ms / 1000.0, why);
  n.recent_losses.clear();
}

bool forgive_losses(node_entry& n, net::steady::time_point now) {
  const bool was = n.quarantined(now);
  n.quarantine_end = {};
  n.quarantined_until_ms = 0;
  n.quarantine_level = 0;
  n.recent_losses.clear();
  return was;
}

bool quarantine_ended(node_entry& n, net::steady::time_point now) {
  if (n.quarantined_until_ms == 0 || n.quarantined(now)) return false;
  n.quarantined_until_ms = 0;
  spdlog::info("node {}'s quarantine is over", n.name);
  return true;
}

}  // namespace hearth::broker
