// The client sessions (client-sessions.h): submissions, watching, cancelling.
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

}  // namespace

const job_row* visible_job(turn_output& out, job_table& jobs, job_store& store,
                           const std::string& rid, const peer& who, uint64_t request_id,
                           uint64_t job_id, std::optional<job_row>& stored) {
  const job_row* row = nullptr;
  if (const live_job* live = jobs.find(job_id)) {
    row = &live->row;
  } else if ((stored = store.job(job_id))) {
    row = &*stored;
  }
  if (!row) {
    out.send_error(rid, request_id, wire::error_code::not_found,
                   "no job " + std::to_string(job_id));
    return nullptr;
  }
  if (!may_access(who, row->owner)) {
    out.send_error(rid, request_id, wire::error_code::unauthorized,
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
          rid, m.request_id, error_code::no_chat_template,
          "model '" + m.model +
              "' has no chat template its nodes can use, so chat messages cannot "
              "be formatted for it; name a template (chat_template) or send a "
              "prompt");
    }
  }
  // Choices run on one node's slots: refused now when every online node serving the model has
  // too few (a node with more may come later for a job already queued; it then waits).
  if (const uint32_t most = nodes_.most_slots_serving(m.model);
      most > 0 && most < choices_of(m.params)) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params,
                           "n must be at most " + std::to_string(most) +
                               " (the most slots of an online node serving model '" + m.model +
                               "'), got " + std::to_string(m.params.api.n));
  }
  if (jobs_.queued() >= cfg_.max_queue) {
    return out_.send_error(
        rid, m.request_id, error_code::queue_full,
        "the queue is full (" + std::to_string(cfg_.max_queue) + " jobs waiting)");
  }
  const uint64_t bytes = request_bytes(m.prompt, m.messages, m.params);
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
  j.last_waiting_sent = nodes_.waiting_reason(j.row.model, choices_of(j.row.params));
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
  if (!visible_job(out_, jobs_, store_, rid, who, m.request_id, m.job_id, stored)) return;
  out_.send(rid, wire::ok{m.request_id});
  watch_job(rid, m.job_id, m);
}

void client_sessions::watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has) {
  if (live_job* live = jobs_.find(job_id)) {
    live_job& j = *live;
    j.watchers.insert(rid);
    if (j.row.state == wire::job_state::queued) {
      j.last_position_sent = jobs_.queue_position(j);
      j.last_waiting_sent = nodes_.waiting_reason(j.row.model, choices_of(j.row.params));
      out_.send(rid, wire::job_queued{j.row.id, j.last_position_sent, j.last_waiting_sent});
      return;
    }
    if (j.row.state == wire::job_state::running) {
      out_.send(rid, wire::job_running{j.row.id, j.row.attempts, j.row.node});
      const output_mark from = watch_resume_mark(has, j.row.attempts, j.next_seq, j.output.size());
      // The output so far goes out in pages over the next turns, as to a watcher that lagged.
      if (from.seq < j.next_seq || from.byte < j.output.size()) {
        relay_.catch_up_running(j, rid, from);
      }
      return;
    }
    // It finished earlier in this turn (a re-watch after a reconnect can come in the same turn
    // as the node's job_final): its end went to the watchers it had then, and it leaves memory
    // at the end of the turn. This watcher gets it from the store, which has this turn's writes,
    // as it would a turn later. It stays among the watchers: should the turn's commit fail, the
    // job is reloaded running with them (storage-recovery.h).
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
  const job_row* row = visible_job(out_, jobs_, store_, rid, who, m.request_id, m.job_id, stored);
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

}  // namespace hearth::broker
