// The job history (job-history.h): paged queries of jobs, pruning and retention.
#include "broker/job-history.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hearth::broker {
namespace {

wire::job_summary summary_of(const job_row& r, std::string owner) {
  wire::job_summary s;
  s.job_id = r.id;
  s.model = r.model;
  s.state = r.state;
  s.priority = r.priority;
  s.node = r.node;
  s.attempts = r.attempts;
  s.created_ms = r.created_ms;
  s.started_ms = r.started_ms;
  s.finished_ms = r.finished_ms;
  s.n_prompt = r.n_prompt;
  s.n_gen = r.n_gen;
  s.stop_reason = r.stop_reason;
  s.error = r.error;
  s.owner = std::move(owner);
  return s;
}

uint32_t page_bytes(uint32_t requested) {
  if (requested == 0) return wire::job_page_bytes_default;
  return std::min(requested, wire::job_page_bytes_max);
}

// A list reply stops adding jobs past this many bytes, and cuts long errors, so that it stays far
// below the largest message whatever the jobs hold.
constexpr size_t k_list_reply_bytes = 1 << 20;
constexpr size_t k_list_error_bytes = 4096;

}  // namespace

void job_history::list_jobs(const std::string& rid, const peer& who, const wire::list_jobs& m) {
  job_filter f;
  if (!m.state.empty()) {
    f.state = wire::job_state_from_name(m.state);
    if (!f.state) {
      return out_.send_error(rid, m.request_id, wire::error_code::invalid_params,
                             "unknown state '" + m.state +
                                 "' (states: queued, running, completed, failed, cancelled)");
    }
  }
  f.model = m.model;
  if (who.role != peer_role::admin) f.owner = who.key;  // a client lists its own jobs
  f.limit = std::min<uint32_t>(m.limit == 0 ? 20 : m.limit, wire::max_array_items);
  wire::jobs_reply r;
  r.request_id = m.request_id;
  size_t bytes = 0;
  for (const auto& row : store_.jobs(f)) {
    auto s = summary_of(row, owner_name(row.owner));
    if (const live_job* live = jobs_.find(row.id)) s.n_gen = uint32_t(live->next_seq);
    if (s.error.size() > k_list_error_bytes) {
      s.error = std::string(utf8_page(s.error, 0, k_list_error_bytes)) + "...";
    }
    bytes += 256 + s.model.size() + s.node.size() + s.stop_reason.size() + s.error.size();
    if (bytes > k_list_reply_bytes) break;
    r.jobs.push_back(std::move(s));
  }
  out_.send(rid, r);
}

void job_history::get_job(const std::string& rid, const peer& who, const wire::get_job& m) {
  std::optional<job_row> stored;
  const job_row* row = visible_job(out_, jobs_, store_, rid, who, m.request_id, m.job_id, stored);
  if (!row) return;
  wire::job_reply r;
  r.request_id = m.request_id;
  r.job.summary = summary_of(*row, owner_name(row->owner));
  r.job.prompt = utf8_page(row->prompt, m.prompt_offset, page_bytes(m.max_prompt_bytes));
  r.job.messages = row->messages;
  r.job.params = row->params;
  const uint64_t page = page_bytes(m.max_output_bytes);
  if (const live_job* live = jobs_.find(m.job_id)) {
    // A live job's output in memory is the newest record (it runs ahead of the store's).
    const live_job& j = *live;
    r.job.summary.n_gen = uint32_t(j.next_seq);
    r.job.output = utf8_page(j.output, m.output_offset, page);
    r.output_total_bytes = j.output.size();
  } else {
    const std::string window =
        store_.read_output(m.job_id, m.output_offset, page + k_utf8_lookahead);
    const bool at_end = m.output_offset + window.size() >= row->output_bytes;
    r.job.output = utf8_page(
        window, 0, at_end ? page : std::min<uint64_t>(page, window.size() - k_utf8_lookahead));
    r.output_total_bytes = row->output_bytes;
  }
  r.job.events = store_.job_events(m.job_id);
  if (row->state == wire::job_state::queued)
    r.job.waiting = nodes_.waiting_reason(row->model, choices_of(row->params));
  r.output_offset = std::min<uint64_t>(m.output_offset, r.output_total_bytes);
  r.prompt_offset = std::min<uint64_t>(m.prompt_offset, row->prompt.size());
  r.prompt_total_bytes = row->prompt.size();
  out_.send(rid, r);
}

void job_history::prune(const std::string& rid, const wire::prune_jobs& m) {
  if (storage_.refuse(out_, rid, m.request_id)) return;
  if (m.max_age_ms == 0 && m.keep_last == 0) {
    return out_.send_error(rid, m.request_id, wire::error_code::invalid_params,
                           "prune_jobs needs max_age_ms or keep_last (or both)");
  }
  // Worked through a batch per turn (prune_step), so a large history never stalls the broker.
  prunes_.push_back({rid, m.request_id, retention{m.max_age_ms, m.keep_last}, 0});
}

void job_history::prune_step(net::steady::time_point now) {
  constexpr uint32_t k_batch = 500;
  if (!prunes_.empty()) {
    auto& p = prunes_.front();
    // Worked in this turn: if the turn's commit fails, it is answered storage_unavailable and
    // dropped (storage_failed), like a request of the turn.
    out_.note_request(p.routing_id, p.request_id);
    const uint64_t n = store_.prune(p.rule, net::wall_ms(), k_batch);
    p.pruned += n;
    if (n < k_batch) {
      spdlog::info("pruned {} finished jobs (prune_jobs)", p.pruned);
      out_.send(p.routing_id, wire::pruned{p.request_id, p.pruned});
      prunes_.pop_front();
    }
    return;
  }
  const retention rule = broker_retention(cfg_);
  if (!rule.any() || (!retention_more_ && now < next_retention_)) return;
  // A cheap query on an index of finished jobs when there is nothing to delete.
  next_retention_ = now + std::chrono::seconds(1);
  const uint64_t n = store_.prune(rule, net::wall_ms(), k_batch);
  retention_more_ = n == k_batch;
  if (n > 0) spdlog::debug("retention: pruned {} finished jobs", n);
}

std::string job_history::owner_name(const std::string& owner_key) const {
  if (owner_key.starts_with("api:")) {
    if (const api_key_record* k = api_keys_.find_id(std::string_view(owner_key).substr(4))) {
      return k->name;
    }
    return owner_key;
  }
  if (auth_) {
    if (const allowed_key* k = auth_->find(owner_key)) return k->name;
  }
  return owner_key;
}

void job_history::forget_prunes(const std::vector<std::pair<std::string, uint64_t>>& requests) {
  std::erase_if(prunes_, [&](const pending_prune& p) {
    return std::find(requests.begin(), requests.end(), std::pair(p.routing_id, p.request_id)) !=
           requests.end();
  });
}

}  // namespace hearth::broker
