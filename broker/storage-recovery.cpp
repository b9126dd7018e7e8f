#include "broker/storage-recovery.h"

#include <spdlog/spdlog.h>

#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace hearth::broker {

void storage_recovery::load() {
  nodes_.load();
  api_keys_.load();
  jobs_.load();
}

bool storage_recovery::serving(net::steady::time_point now) {
  if (!reload_pending_) return true;
  if (storage_.down(now)) return false;
  try {
    reload();
    reload_pending_ = false;
    spdlog::info("the jobs are loaded again; serving");
    return true;
  } catch (const std::exception& e) {
    storage_.back_off(now);
    spdlog::error("{}; trying again in {} ms", e.what(), storage_.backoff().count());
    return false;
  }
}

void storage_recovery::failed(const std::exception& e) {
  try {
    store_.rollback();
  } catch (const std::exception& r) {
    // SQLite may already have rolled the transaction back itself; nothing of it is kept either
    // way, and the reload below reads what is.
    spdlog::warn("rolling back the failed turn: {}", r.what());
  }
  const auto now = net::steady::now();
  storage_.back_off(now);
  spdlog::error(
      "the job database could not be written ({}); this turn's changes are undone, requests "
      "that write are refused for {} ms, then retried",
      e.what(), storage_.backoff().count());
  // Nothing of the turn was kept, so none of its messages may go out: they could acknowledge a
  // job that is not stored, or assign one the store still has queued.
  out_.clear();
  jobs_.discard_finished();
  turn_metrics_.discard();
  for (const auto& [rid, request_id] : out_.requests()) {
    out_.send_error(rid, request_id, wire::error_code::storage_unavailable,
                    std::string("the job database could not be written (") + e.what() +
                        "); nothing of this request was kept; retry later");
  }
  history_.forget_prunes(out_.requests());
  try {
    reload();
  } catch (const std::exception& r) {
    reload_pending_ = true;
    spdlog::error("{}; trying again in {} ms", r.what(), storage_.backoff().count());
  }
}

void storage_recovery::reload() {
  // Watchers are connections, not records, and what they were sent stays sent: both carry over
  // to the reloaded jobs. What the failed turn relayed was not sent (failed()).
  struct carried {
    std::set<std::string> watchers;
    uint32_t attempt = 0;
    output_mark relayed;
  };
  std::unordered_map<uint64_t, carried> keep;
  auto& relayed_before = attempts_.relayed_before_turn();
  for (auto& [id, j] : jobs_.jobs()) {
    const auto before = relayed_before.find(id);
    keep[id] = {std::move(j.watchers), j.row.attempts,
                before != relayed_before.end() ? before->second : j.relayed};
  }
  relayed_before.clear();
  jobs_.clear();
  nodes_.clear_running();
  try {
    // Keys created or revoked in the failed turn were not kept either.
    api_keys_.load();
    jobs_.load();
  } catch (const std::exception& e) {
    // Reading failed too: the broker cannot know what it owes anyone.
    throw std::runtime_error(std::string("cannot reload the jobs after a storage failure: ") +
                             e.what());
  }
  for (auto& [id, j] : jobs_.jobs()) {
    auto k = keep.find(id);
    if (k == keep.end()) continue;
    j.watchers = std::move(k->second.watchers);
    if (k->second.attempt == j.row.attempts) j.relayed = k->second.relayed;
  }
  relay_.reloaded(jobs_.jobs());
  // The nodes are still connected: each resumes its attempts from what was stored. Their credit
  // is what they have free (assignments of the failed turn were never sent).
  for (auto& [id, j] : jobs_.jobs()) {
    if (j.row.state != wire::job_state::running) continue;
    const node_entry* n = nodes_.find(j.row.node);
    if (!n || !n->online) continue;
    // As on a node's hello (node-attempts.cpp): not counted as unanswered, since the node may
    // have nothing past what was stored.
    j.recovered_deadline.reset();
    j.resume.outstanding = true;
    j.resume.gap = false;
    j.resume.sent = net::steady::now();
    out_.send(n->routing_id, wire::job_resume{id, j.row.attempts, j.next_seq});
  }
  nodes_.credit_free_slots();
  jobs_.dispatch_later();
}

}  // namespace hearth::broker
