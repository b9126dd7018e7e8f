// The transfers the broker directs, as a table (transfer-table.h).
#include "broker/transfer-table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace hearth::broker {

model_transfer& transfer_table::add(model_transfer t) {
  const uint64_t id = t.info.transfer_id;
  return live_.emplace(id, std::move(t)).first->second;
}

model_transfer* transfer_table::running(const std::string& model, const std::string& node) {
  for (auto& [id, t] : live_) {
    if (t.info.model == model && t.info.node == node) return &t;
  }
  return nullptr;
}

std::string transfer_table::copying(const std::string& model) const {
  for (const auto& [id, t] : live_) {
    if (t.copy && t.info.model == model) return t.info.node;
  }
  return "";
}

uint32_t transfer_table::onto(const std::string& node) const {
  uint32_t n = 0;
  for (const auto& [id, t] : live_) n += t.info.node == node;
  return n;
}

uint32_t transfer_table::copies_from(const std::string& holder) const {
  uint32_t n = 0;
  for (const auto& [id, t] : live_) {
    n += std::find(t.peers.begin(), t.peers.end(), holder) != t.peers.end();
  }
  return n;
}

model_transfer* transfer_table::report(const node_entry& node, wire::transfer_status& m) {
  // A node's words stay small in every models_reply that lists them.
  if (m.error.size() > k_max_error_bytes) m.error.resize(k_max_error_bytes);
  auto it = live_.find(m.transfer_id);
  if (it == live_.end()) {
    // A node that came back (its transfers failed as it went offline) and goes on with one.
    auto f = std::find_if(finished_.begin(), finished_.end(), [&](const model_transfer& t) {
      return t.info.transfer_id == m.transfer_id && t.info.node == node.name &&
             t.info.state == "failed";
    });
    if (f == finished_.end()) return nullptr;
    f->info.error.clear();
    it = live_.emplace(m.transfer_id, std::move(*f)).first;
    finished_.erase(f);
  }
  model_transfer& t = it->second;
  if (t.info.node != node.name) {
    spdlog::debug("node {}: dropped a transfer_status of transfer {} (node {}'s)", node.name,
                  m.transfer_id, t.info.node);
    return nullptr;
  }
  t.last_report = net::steady::now();
  t.info.bytes_done = m.bytes_done;
  if (m.bytes_total > 0) t.info.bytes_total = m.bytes_total;
  count_bytes(t, m);
  if (m.state == "running") {
    t.info.state = "running";
  } else if (m.state == "done") {
    finish(m.transfer_id, "done", "");
  } else if (m.state == "failed") {
    return &t;
  }
  return nullptr;
}

void transfer_table::count_bytes(model_transfer& t, const wire::transfer_status& m) {
  // A copy's bytes all come from peers, whatever an older node says of them.
  const uint64_t peers = t.copy ? m.bytes_done : std::min(m.bytes_from_peers, m.bytes_done);
  const uint64_t internet = m.bytes_done - peers;
  if (peers > t.counted_peers) {
    metrics_.add(metric::transfer_bytes, {"peer"}, double(peers - t.counted_peers));
    t.counted_peers = peers;
  }
  if (internet > t.counted_internet) {
    metrics_.add(metric::transfer_bytes, {"internet"}, double(internet - t.counted_internet));
    t.counted_internet = internet;
  }
}

void transfer_table::finish(uint64_t id, const std::string& state, const std::string& error) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  model_transfer t = std::move(it->second);
  live_.erase(it);
  t.info.state = state;
  t.info.error = error;
  metrics_.add(metric::transfers_finished, {state});
  if (state == "done") {
    spdlog::info("transfer {}: {} is on node {} ({} bytes)", id, t.info.model, t.info.node,
                 t.info.bytes_done);
  } else {
    spdlog::warn("transfer {} of {} onto node {} failed: {}", id, t.info.model, t.info.node, error);
  }
  finished_.push_back(std::move(t));
  while (finished_.size() > k_finished_kept) finished_.pop_front();
}

void transfer_table::expire(net::steady::time_point now, const node_map& nodes,
                            const std::function<void(model_transfer&)>& renew) {
  std::vector<std::pair<uint64_t, std::string>> failed;
  for (auto& [id, t] : live_) {
    const auto n = nodes.find(t.info.node);
    if (n == nodes.end() || !n->second.online) {
      failed.push_back({id, "node " + t.info.node + " went offline"});
    } else if (t.info.state == "starting" && now - t.sent > k_start_timeout) {
      failed.push_back({id, "node " + t.info.node + " did not answer the model_fetch within " +
                                std::to_string(k_start_timeout.count()) +
                                " s (a node without model transfers?)"});
    } else if (t.info.state == "running" && now - t.last_report > k_report_timeout) {
      failed.push_back({id, "no progress report from node " + t.info.node + " for " +
                                std::to_string(k_report_timeout.count()) + " s"});
    } else if (t.copy && now >= t.next_tickets) {
      renew(t);
    }
  }
  for (const auto& [id, why] : failed) finish(id, "failed", why);
}

std::vector<wire::transfer_info> transfer_table::listing(size_t max) const {
  std::vector<wire::transfer_info> list;
  for (const auto& [id, t] : live_) {
    if (list.size() < max) list.push_back(t.info);
  }
  for (auto it = finished_.rbegin(); it != finished_.rend() && list.size() < max; ++it) {
    list.push_back(it->info);
  }
  return list;
}

std::map<std::string, size_t> transfer_table::live_by_state() const {
  std::map<std::string, size_t> by_state{{"starting", 0}, {"running", 0}};
  for (const auto& [id, t] : live_) ++by_state[t.info.state];
  return by_state;
}

}  // namespace hearth::broker
