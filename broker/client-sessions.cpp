// The client sessions (client-sessions.h): submissions, watching, cancelling, history queries.
#include "broker/client-sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <string_view>

#include "broker/reply-list.h"
#include "common/closest-name.h"
#include "schema/job-params.h"

namespace hearth::broker {
namespace {

uint64_t fresh_seed() {
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t s = 0;
  // 0 means "choose one" on the wire and all-ones means "random" to the sampler.
  while (s == 0 || s == UINT64_MAX) s = rng();
  return s;
}

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

const job_row* client_sessions::visible_job(const std::string& rid, const peer& who,
                                            uint64_t request_id, uint64_t job_id,
                                            std::optional<job_row>& stored) {
  const job_row* row = nullptr;
  if (const live_job* live = jobs_.find(job_id)) {
    row = &live->row;
  } else if ((stored = store_.job(job_id))) {
    row = &*stored;
  }
  if (!row) {
    out_.send_error(rid, request_id, wire::error_code::not_found,
                    "no job " + std::to_string(job_id));
    return nullptr;
  }
  if (!may_access(who, row->owner)) {
    out_.send_error(rid, request_id, wire::error_code::unauthorized,
                    "job " + std::to_string(job_id) + " belongs to another client");
    return nullptr;
  }
  return row;
}

void client_sessions::submit(const std::string& rid, const peer& who, wire::submit m) {
  using wire::error_code;
  if (m.request_key.size() > wire::max_request_key_bytes) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params,
                           "request_key is " + std::to_string(m.request_key.size()) +
                               " bytes; at most " + std::to_string(wire::max_request_key_bytes));
  }
  if (!m.request_key.empty()) {
    // A retry of a submit whose reply was lost: the job it made, not another one.
    if (auto id = store_.job_by_request_key(who.key, m.request_key)) {
      const live_job* live = jobs_.find(*id);
      const bool queued = live && live->row.state == wire::job_state::queued;
      out_.send(rid, wire::accepted{m.request_id, *id, queued ? jobs_.queue_position(*live) : 0});
      if (m.watch) watch_job(rid, *id, wire::watch{});
      return;
    }
  }
  if (storage_.refuse(out_, rid, m.request_id)) return;
  if (m.model.empty())
    return out_.send_error(rid, m.request_id, error_code::invalid_params, "no model named");
  if (m.prompt.empty() && m.messages.empty()) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params, "the job has no prompt");
  }
  if (auto e = wire::job_params_check(m.params); !e.ok()) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params, e.message);
  }
  const std::set<std::string>& known_models = nodes_.known_models();
  if (!m.wait_model && !known_models.contains(m.model)) {
    std::string known;
    for (const auto& k : known_models) known += (known.empty() ? "" : ", ") + k;
    const std::string close = closest_name(m.model, {known_models.begin(), known_models.end()});
    return out_.send_error(rid, m.request_id, error_code::unknown_model,
                           "no node has ever offered model '" + m.model + "'" +
                               (close.empty() ? "" : "; did you mean '" + close + "'?") +
                               " (known: " + (known.empty() ? "none" : known) + ")");
  }
  if (!m.messages.empty() && m.params.chat_template.empty()) {
    // A chat job that no node could format: refused now rather than failed once assigned.
    if (nodes_.chat_unformattable(m.model)) {
      return out_.send_error(
          rid, m.request_id, error_code::invalid_params,
          "model '" + m.model +
              "' has no chat template its nodes can use, so chat messages cannot "
              "be formatted for it; name a template (chat_template) or send a "
              "prompt");
    }
  }
  if (jobs_.queued() >= cfg_.max_queue) {
    return out_.send_error(
        rid, m.request_id, error_code::queue_full,
        "the queue is full (" + std::to_string(cfg_.max_queue) + " jobs waiting)");
  }
  const uint64_t bytes = request_bytes(m.prompt, m.messages);
  const client_usage used = jobs_.usage_of(who.key);
  if (used.jobs >= cfg_.max_client_queued_jobs) {
    return out_.send_error(rid, m.request_id, error_code::limit_reached,
                           "max_client_queued_jobs is reached: this client has " +
                               std::to_string(used.jobs) + " unfinished jobs, the limit is " +
                               std::to_string(cfg_.max_client_queued_jobs));
  }
  if (used.bytes + bytes > cfg_.max_client_queued_bytes) {
    return out_.send_error(rid, m.request_id, error_code::limit_reached,
                           "max_client_queued_bytes would be passed: this client's unfinished jobs "
                           "hold " +
                               std::to_string(used.bytes) +
                               " bytes of prompts and messages, this one " + std::to_string(bytes) +
                               ", the limit is " + std::to_string(cfg_.max_client_queued_bytes));
  }
  const uint64_t queued_bytes = jobs_.unfinished_bytes();
  if (queued_bytes + bytes > cfg_.max_queue_bytes) {
    return out_.send_error(rid, m.request_id, error_code::queue_full,
                           "the queue is full: unfinished jobs hold " +
                               std::to_string(queued_bytes) +
                               " bytes of prompts and messages, this one " + std::to_string(bytes) +
                               ", max_queue_bytes is " + std::to_string(cfg_.max_queue_bytes));
  }
  if (m.params.seed == 0) m.params.seed = fresh_seed();

  job_row row;
  row.owner = who.key;
  row.model = std::move(m.model);
  row.prompt = std::move(m.prompt);
  row.messages = std::move(m.messages);
  row.params = std::move(m.params);
  row.priority = m.priority;
  row.state = wire::job_state::queued;
  row.created_ms = net::wall_ms();
  row.request_key = std::move(m.request_key);
  row.id = store_.insert_job(row, row.created_ms);
  const uint64_t id = row.id;
  live_job& j = jobs_.add(std::move(row));
  turn_metrics_.add(metric::jobs_submitted, {j.row.model});
  if (m.watch) j.watchers.insert(rid);
  const uint32_t position = jobs_.queue_position(j);
  j.last_position_sent = position;
  j.last_waiting_sent = nodes_.waiting_reason(j.row.model);
  out_.send(rid, wire::accepted{m.request_id, id, position, j.last_waiting_sent});
}

namespace {
// Where a re-attaching watcher's stream resumes (PROTOCOL.md section 10.3): from what it says it
// has of `attempt` when that is the job's latest attempt and within what the broker holds of it
// (`seq` tokens, `output` bytes); otherwise from the attempt's start, which the watcher knows to
// take as a restatement. Its word is checked, not trusted: an offset beyond the output, or more
// tokens than were streamed, start over.
output_mark watch_resume_mark(const wire::watch& m, uint32_t attempt, uint64_t seq,
                              uint64_t output_bytes) {
  if (m.attempt == 0 || m.attempt != attempt || m.seq > seq || m.output_offset > output_bytes) {
    return {};
  }
  return {m.seq, m.output_offset};
}
}  // namespace

void client_sessions::watch(const std::string& rid, const peer& who, const wire::watch& m) {
  std::optional<job_row> stored;
  if (!visible_job(rid, who, m.request_id, m.job_id, stored)) return;
  out_.send(rid, wire::ok{m.request_id});
  watch_job(rid, m.job_id, m);
}

void client_sessions::watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has) {
  if (live_job* live = jobs_.find(job_id)) {
    live_job& j = *live;
    j.watchers.insert(rid);
    if (j.row.state == wire::job_state::queued) {
      j.last_position_sent = jobs_.queue_position(j);
      j.last_waiting_sent = nodes_.waiting_reason(j.row.model);
      out_.send(rid, wire::job_queued{j.row.id, j.last_position_sent, j.last_waiting_sent});
    } else if (j.row.state == wire::job_state::running) {
      out_.send(rid, wire::job_running{j.row.id, j.row.attempts, j.row.node});
      const output_mark from = watch_resume_mark(has, j.row.attempts, j.next_seq, j.output.size());
      // The output so far goes out in pages over the next turns, as to a watcher that lagged.
      if (from.seq < j.next_seq || from.byte < j.output.size()) {
        relay_.catch_up_running(j, rid, from);
      }
    }
    return;
  }
  std::optional<job_row> row = store_.job(job_id);
  if (!row) return;
  const wire::job_done done{row->id,    row->attempts, row->state, row->stop_reason,
                            row->error, row->n_prompt, row->n_gen};
  const output_mark from = watch_resume_mark(has, row->attempts, row->n_gen, row->output_bytes);
  if (from.seq == row->n_gen && from.byte == row->output_bytes) return out_.send(rid, done);
  relay_.catch_up_finished(*row, rid, from, wire::encode(done));
}

void client_sessions::cancel(const std::string& rid, const peer& who, const wire::cancel& m) {
  if (storage_.refuse(out_, rid, m.request_id)) return;
  std::optional<job_row> stored;
  const job_row* row = visible_job(rid, who, m.request_id, m.job_id, stored);
  if (!row) return;
  if (live_job* live = jobs_.find(m.job_id)) {
    live_job& j = *live;
    if (j.row.state == wire::job_state::queued) {
      jobs_.finish(j, wire::job_state::cancelled, "cancelled", "", 0, 0);
    } else if (j.row.state == wire::job_state::running) {
      j.cancel_requested = true;
      if (node_entry* n = nodes_.find(j.row.node); n && n->online) {
        out_.send(n->routing_id, wire::job_cancel{j.row.id, j.row.attempts});
      } else {
        jobs_.finish(j, wire::job_state::cancelled, "cancelled", "", j.row.n_prompt,
                     uint32_t(j.next_seq));
      }
    } else {
      return out_.send_error(rid, m.request_id, wire::error_code::not_cancellable,
                             "job " + std::to_string(m.job_id) + " has already finished");
    }
    spdlog::info("job {} cancelled by {}", m.job_id,
                 who.name.empty() ? std::string("a client") : "key '" + who.name + "'");
    return out_.send(rid, wire::ok{m.request_id});
  }
  out_.send_error(rid, m.request_id, wire::error_code::not_cancellable,
                  "job " + std::to_string(m.job_id) + " has already ended (" +
                      std::string(wire::job_state_name(row->state)) + ")");
}

void client_sessions::list_jobs(const std::string& rid, const peer& who, const wire::list_jobs& m) {
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

void client_sessions::get_job(const std::string& rid, const peer& who, const wire::get_job& m) {
  std::optional<job_row> stored;
  const job_row* row = visible_job(rid, who, m.request_id, m.job_id, stored);
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
  if (row->state == wire::job_state::queued) r.job.waiting = nodes_.waiting_reason(row->model);
  r.output_offset = std::min<uint64_t>(m.output_offset, r.output_total_bytes);
  r.prompt_offset = std::min<uint64_t>(m.prompt_offset, row->prompt.size());
  r.prompt_total_bytes = row->prompt.size();
  out_.send(rid, r);
}

void client_sessions::prune(const std::string& rid, const wire::prune_jobs& m) {
  if (storage_.refuse(out_, rid, m.request_id)) return;
  if (m.max_age_ms == 0 && m.keep_last == 0) {
    return out_.send_error(rid, m.request_id, wire::error_code::invalid_params,
                           "prune_jobs needs max_age_ms or keep_last (or both)");
  }
  // Worked through a batch per turn (prune_step), so a large history never stalls the broker.
  prunes_.push_back({rid, m.request_id, retention{m.max_age_ms, m.keep_last}, 0});
}

void client_sessions::prune_step(net::steady::time_point now) {
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

std::string client_sessions::owner_name(const std::string& owner_key) const {
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

void client_sessions::forget_prunes(const std::vector<std::pair<std::string, uint64_t>>& requests) {
  std::erase_if(prunes_, [&](const pending_prune& p) {
    return std::find(requests.begin(), requests.end(), std::pair(p.routing_id, p.request_id)) !=
           requests.end();
  });
}

}  // namespace hearth::broker
