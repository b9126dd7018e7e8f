// The client side of the broker: submissions, watching, cancelling and history queries.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <string_view>

#include "broker/broker.h"
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

// Bytes [offset, offset + max_bytes) of `text`, shortened to end on a UTF-8 character boundary
// (but holding at least one character when there is one), so that each page is valid UTF-8 when
// the whole is.
std::string_view utf8_page(std::string_view text, uint64_t offset, uint64_t max_bytes) {
  if (offset >= text.size()) return {};
  const size_t begin = size_t(offset);
  const size_t limit = std::min<uint64_t>(text.size(), begin + max_bytes);
  auto continuation = [&](size_t i) { return (uint8_t(text[i]) & 0xC0) == 0x80; };
  size_t end = limit;
  while (end > begin && end < text.size() && continuation(end)) --end;
  if (end == begin) {
    end = std::min(limit + 1, text.size());
    while (end < text.size() && continuation(end)) ++end;
  }
  return text.substr(begin, end - begin);
}

uint32_t page_bytes(uint32_t requested) {
  if (requested == 0) return wire::job_page_bytes_default;
  return std::min(requested, wire::job_page_bytes_max);
}

// A list reply stops adding jobs past this many bytes, and cuts long errors, so that it stays far
// below the largest message whatever the jobs hold.
constexpr size_t k_list_reply_bytes = 1 << 20;
constexpr size_t k_list_error_bytes = 4096;

// What a lagging watcher is sent per turn once its pipe has room again (at most: its pipe's room,
// peer-outbox.h), and the least room worth sending a page into.
constexpr uint64_t k_catch_up_bytes = 1 << 20;
constexpr uint64_t k_catch_up_min_bytes = 16 << 10;

// Bytes read past a page of stored output, so that the page can end on a character boundary
// (a UTF-8 character has at most 4 bytes).
constexpr uint64_t k_utf8_lookahead = 4;

}  // namespace

const job_row* broker::visible_job(const std::string& rid, const peer& who, uint64_t request_id,
                                   uint64_t job_id, std::optional<job_row>& stored) {
  const job_row* row = nullptr;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    row = &it->second.row;
  } else if ((stored = store_->job(job_id))) {
    row = &*stored;
  }
  if (!row) {
    send_error(rid, request_id, wire::error_code::not_found, "no job " + std::to_string(job_id));
    return nullptr;
  }
  if (!may_access(who, row->owner)) {
    send_error(rid, request_id, wire::error_code::unauthorized,
               "job " + std::to_string(job_id) + " belongs to another client");
    return nullptr;
  }
  return row;
}

bool broker::refuse_while_storage_down(const std::string& rid, uint64_t request_id) {
  const auto now = net::steady::now();
  if (!storage_down(now)) return false;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(storage_retry_at_ - now).count();
  send_error(rid, request_id, wire::error_code::storage_unavailable,
             "the job database cannot be written just now (see the broker's log); nothing of this "
             "request was kept; retry in " +
                 std::to_string(ms) + " ms");
  return true;
}

void broker::on_submit(const std::string& rid, const peer& who, wire::submit m) {
  using wire::error_code;
  if (m.request_key.size() > wire::max_request_key_bytes) {
    return send_error(rid, m.request_id, error_code::invalid_params,
                      "request_key is " + std::to_string(m.request_key.size()) +
                          " bytes; at most " + std::to_string(wire::max_request_key_bytes));
  }
  if (!m.request_key.empty()) {
    // A retry of a submit whose reply was lost: the job it made, not another one.
    if (auto id = store_->job_by_request_key(who.key, m.request_key)) {
      auto it = jobs_.find(*id);
      const bool queued = it != jobs_.end() && it->second.row.state == wire::job_state::queued;
      send(rid, wire::accepted{m.request_id, *id, queued ? queue_position(it->second) : 0});
      if (m.watch) watch_job(rid, *id, wire::watch{});
      return;
    }
  }
  if (refuse_while_storage_down(rid, m.request_id)) return;
  if (m.model.empty())
    return send_error(rid, m.request_id, error_code::invalid_params, "no model named");
  if (m.prompt.empty() && m.messages.empty()) {
    return send_error(rid, m.request_id, error_code::invalid_params, "the job has no prompt");
  }
  if (auto e = wire::job_params_check(m.params); !e.empty()) {
    return send_error(rid, m.request_id, error_code::invalid_params, e);
  }
  if (!m.wait_model && !known_models_.contains(m.model)) {
    std::string known;
    for (const auto& k : known_models_) known += (known.empty() ? "" : ", ") + k;
    const std::string close = closest_name(m.model, {known_models_.begin(), known_models_.end()});
    return send_error(rid, m.request_id, error_code::unknown_model,
                      "no node has ever offered model '" + m.model + "'" +
                          (close.empty() ? "" : "; did you mean '" + close + "'?") +
                          " (known: " + (known.empty() ? "none" : known) + ")");
  }
  if (!m.messages.empty() && m.params.chat_template.empty()) {
    // A chat job that no node could format: refused now rather than failed once assigned. Only
    // online nodes' files are known; with none online the job waits as any other.
    bool served = false, formattable = false;
    for (const auto& [name, n] : nodes_) {
      if (!n.online) continue;
      for (const auto& mi : n.models) {
        if (mi.name != m.model) continue;
        served = true;
        formattable = formattable || !mi.chat_template.empty();
      }
    }
    if (served && !formattable) {
      return send_error(rid, m.request_id, error_code::invalid_params,
                        "model '" + m.model +
                            "' has no chat template its nodes can use, so chat messages cannot "
                            "be formatted for it; name a template (chat_template) or send a "
                            "prompt");
    }
  }
  if (n_queued_ >= cfg_.max_queue) {
    return send_error(rid, m.request_id, error_code::queue_full,
                      "the queue is full (" + std::to_string(cfg_.max_queue) + " jobs waiting)");
  }
  const uint64_t bytes = request_bytes(m.prompt, m.messages);
  const auto u = usage_.find(who.key);
  const client_usage used = u == usage_.end() ? client_usage{} : u->second;
  if (used.jobs >= cfg_.max_client_queued_jobs) {
    return send_error(rid, m.request_id, error_code::limit_reached,
                      "max_client_queued_jobs is reached: this client has " +
                          std::to_string(used.jobs) + " unfinished jobs, the limit is " +
                          std::to_string(cfg_.max_client_queued_jobs));
  }
  if (used.bytes + bytes > cfg_.max_client_queued_bytes) {
    return send_error(rid, m.request_id, error_code::limit_reached,
                      "max_client_queued_bytes would be passed: this client's unfinished jobs "
                      "hold " +
                          std::to_string(used.bytes) + " bytes of prompts and messages, this one " +
                          std::to_string(bytes) + ", the limit is " +
                          std::to_string(cfg_.max_client_queued_bytes));
  }
  if (queued_bytes_ + bytes > cfg_.max_queue_bytes) {
    return send_error(rid, m.request_id, error_code::queue_full,
                      "the queue is full: unfinished jobs hold " + std::to_string(queued_bytes_) +
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
  const uint64_t id = store_->insert_job(row, row.created_ms);
  live_job& j = jobs_[id];
  j.row = std::move(row);
  j.row.id = id;
  usage_add(j);
  enqueue(j);
  turn_metrics_.add(metric::jobs_submitted, {j.row.model});
  if (m.watch) j.watchers.insert(rid);
  const uint32_t position = queue_position(j);
  j.last_position_sent = position;
  j.last_waiting_sent = waiting_reason(j.row.model);
  send(rid, wire::accepted{m.request_id, id, position, j.last_waiting_sent});
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

void broker::on_watch(const std::string& rid, const peer& who, const wire::watch& m) {
  std::optional<job_row> stored;
  if (!visible_job(rid, who, m.request_id, m.job_id, stored)) return;
  send(rid, wire::ok{m.request_id});
  watch_job(rid, m.job_id, m);
}

void broker::watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has) {
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    live_job& j = it->second;
    j.watchers.insert(rid);
    if (j.row.state == wire::job_state::queued) {
      j.last_position_sent = queue_position(j);
      j.last_waiting_sent = waiting_reason(j.row.model);
      send(rid, wire::job_queued{j.row.id, j.last_position_sent, j.last_waiting_sent});
    } else if (j.row.state == wire::job_state::running) {
      send(rid, wire::job_running{j.row.id, j.row.attempts, j.row.node});
      const output_mark from = watch_resume_mark(has, j.row.attempts, j.next_seq, j.output.size());
      // The output so far goes out in pages over the next turns, as to a watcher that lagged.
      if (from.seq < j.next_seq || from.byte < j.output.size()) {
        watcher_lag& l = lagging_[{job_id, rid}];
        l = {};
        l.has = from;
        l.attempt = j.row.attempts;
      }
    }
    return;
  }
  std::optional<job_row> row = store_->job(job_id);
  if (!row) return;
  const wire::job_done done{row->id,    row->attempts, row->state, row->stop_reason,
                            row->error, row->n_prompt, row->n_gen};
  const output_mark from = watch_resume_mark(has, row->attempts, row->n_gen, row->output_bytes);
  if (from.seq == row->n_gen && from.byte == row->output_bytes) return send(rid, done);
  watcher_lag& l = lagging_[{job_id, rid}];
  l = {};
  l.has = from;
  l.attempt = row->attempts;
  l.finished = true;
  l.final_seq = row->n_gen;
  l.final_bytes = row->output_bytes;
  l.done_body = wire::encode(done);
}

output_mark broker::send_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                     output_mark from, uint64_t end_seq, const std::string& output,
                                     uint64_t max_bytes) {
  return send_output_window(rid, job_id, attempt, from, end_seq, output, 0, output.size(),
                            max_bytes);
}

output_mark broker::send_stored_output_from(const std::string& rid, uint64_t job_id,
                                            uint32_t attempt, output_mark from, uint64_t end_seq,
                                            uint64_t total_bytes, uint64_t max_bytes) {
  // A few bytes more than it sends, so that its pages can end on character boundaries.
  const std::string window = store_->read_output(job_id, from.byte, max_bytes + k_utf8_lookahead);
  return send_output_window(rid, job_id, attempt, from, end_seq, window, from.byte, total_bytes,
                            max_bytes);
}

output_mark broker::send_output_window(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                       output_mark from, uint64_t end_seq, std::string_view window,
                                       uint64_t base, uint64_t total, uint64_t max_bytes) {
  // Pages of at most the default page size. The text carries no token boundaries, so every chunk
  // but the one reaching the end has n_tokens 0 at from.seq (never below the next expected seq:
  // none is dropped as a duplicate) and that one carries the count (PROTOCOL.md section 11).
  // `window` holds bytes [base, base + window.size()) of the attempt's `total` bytes; one that
  // stops short of the end keeps its last bytes for looking ahead at character boundaries.
  uint64_t offset = from.byte;
  if (offset >= total && end_seq == from.seq) return from;
  const uint64_t window_end = base + window.size();
  const uint64_t usable_end =
      window_end >= total ? total
                          : window_end - std::min<uint64_t>(k_utf8_lookahead, window.size());
  uint64_t sent = 0;
  do {
    std::string_view page;
    if (offset < usable_end) {
      // At least 4 bytes, so that a page always holds a whole character.
      const uint64_t room =
          std::min<uint64_t>({wire::job_page_bytes_default, usable_end - offset,
                              std::max<uint64_t>(max_bytes - sent, k_utf8_lookahead)});
      page = utf8_page(window, offset - base, room);
    }
    offset += page.size();
    sent += page.size();
    const bool last = offset >= total;
    send(rid, wire::job_tokens{job_id, attempt, from.seq, last ? uint32_t(end_seq - from.seq) : 0,
                               std::string(page)});
    if (page.empty()) break;
  } while (offset < total && sent < max_bytes);
  return offset >= total ? output_mark{end_seq, offset} : output_mark{from.seq, offset};
}

void broker::deliver(const live_job& j, const std::string& rid, wire::command cmd,
                     const std::string& body) {
  auto lag = lagging_.find({j.row.id, rid});
  switch (cmd) {
    case wire::command::job_tokens:
      if (lag != lagging_.end()) return;  // catch_up_lagging() sends it later, in one piece
      if (outboxes_.bytes_of(rid) > 0) {
        // Its pipe is full: rather than queueing every chunk, remember what it has.
        if (auto t = wire::decode<wire::job_tokens>(body)) {
          watcher_lag& l = lagging_[{j.row.id, rid}];
          l.has = {t->seq, j.output.size() - t->text.size()};
          l.attempt = j.row.attempts;
          return;
        }
      }
      break;
    case wire::command::job_done:
      // The job leaves memory at the end of the turn: the lagging watcher keeps its output (and
      // its job_done) until it has been sent the rest.
      if (lag != lagging_.end()) {
        lag->second.finished = true;
        lag->second.final_seq = j.next_seq;
        lag->second.final_bytes = j.output.size();
        lag->second.done_body = body;
        return;
      }
      break;
    case wire::command::job_running:
    case wire::command::job_restarted:
      // A new attempt: the one it lagged behind is abandoned.
      if (lag != lagging_.end()) lagging_.erase(lag);
      break;
    default:
      break;
  }
  queue_out(rid, cmd, body);
}

void broker::catch_up_lagging() {
  // What each watcher's pipe has room for this turn, shared by the jobs it lags behind on.
  std::unordered_map<std::string, uint64_t> room;
  // And what all peers together may still be given (max_outbox_bytes counts outboxes and pipes),
  // shared by this turn's catch-ups: 500 watchers of a large output that never read took a page
  // each turn, 3.7 MiB each, 1.9 GiB in all.
  uint64_t total_left = outboxes_.total_room();
  const auto now = net::steady::now();
  for (auto it = lagging_.begin(); it != lagging_.end();) {
    if (total_left < k_catch_up_min_bytes) {
      outboxes_.want_room();  // the peers holding the most are asked to read, or dropped
      break;
    }
    const auto& [job_id, rid] = it->first;
    auto r = room.find(rid);
    if (r == room.end()) {
      r = room.emplace(rid, outboxes_.room(*router_, rid, k_catch_up_bytes, now)).first;
    }
    // Too little room to be worth a page: its pipe is nearly full, it is sent more later.
    if (r->second < k_catch_up_min_bytes) {
      ++it;
      continue;
    }
    const uint64_t budget = std::min({k_catch_up_bytes, r->second, total_left});
    const uint64_t queued_before = turn_bytes_[rid];
    watcher_lag& l = it->second;
    const auto spent = [&] {
      const uint64_t queued = turn_bytes_[rid];
      const uint64_t took = queued == k_peer_dropped ? budget : queued - queued_before;
      r->second = queued == k_peer_dropped ? 0 : r->second - std::min(r->second, took);
      total_left -= std::min(total_left, took);
    };
    if (l.finished) {
      // The job's output is in the store: it finished in a turn that has committed.
      l.has = send_stored_output_from(rid, job_id, l.attempt, l.has, l.final_seq, l.final_bytes,
                                      budget);
      spent();
      if (l.has.seq == l.final_seq) {
        queue_out(rid, wire::command::job_done, std::move(l.done_body));
        it = lagging_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    auto j = jobs_.find(job_id);
    if (j == jobs_.end() || j->second.row.state != wire::job_state::running) {
      it = lagging_.erase(it);
      continue;
    }
    const live_job& live = j->second;
    l.has =
        send_output_from(rid, job_id, live.row.attempts, l.has, live.next_seq, live.output, budget);
    spent();
    if (l.has.seq == live.next_seq) {
      it = lagging_.erase(it);
    } else {
      ++it;
    }
  }
}

void broker::on_cancel(const std::string& rid, const peer& who, const wire::cancel& m) {
  if (refuse_while_storage_down(rid, m.request_id)) return;
  std::optional<job_row> stored;
  const job_row* row = visible_job(rid, who, m.request_id, m.job_id, stored);
  if (!row) return;
  if (auto it = jobs_.find(m.job_id); it != jobs_.end()) {
    live_job& j = it->second;
    if (j.row.state == wire::job_state::queued) {
      finish(j, wire::job_state::cancelled, "cancelled", "", 0, 0);
    } else if (j.row.state == wire::job_state::running) {
      j.cancel_requested = true;
      if (auto n = nodes_.find(j.row.node); n != nodes_.end() && n->second.online) {
        send(n->second.routing_id, wire::job_cancel{j.row.id, j.row.attempts});
      } else {
        finish(j, wire::job_state::cancelled, "cancelled", "", j.row.n_prompt,
               uint32_t(j.next_seq));
      }
    } else {
      return send_error(rid, m.request_id, wire::error_code::not_cancellable,
                        "job " + std::to_string(m.job_id) + " has already finished");
    }
    spdlog::info("job {} cancelled by {}", m.job_id,
                 who.name.empty() ? std::string("a client") : "key '" + who.name + "'");
    return send(rid, wire::ok{m.request_id});
  }
  send_error(rid, m.request_id, wire::error_code::not_cancellable,
             "job " + std::to_string(m.job_id) + " has already ended (" +
                 std::string(wire::job_state_name(row->state)) + ")");
}

void broker::on_list_jobs(const std::string& rid, const peer& who, const wire::list_jobs& m) {
  job_filter f;
  if (!m.state.empty()) {
    f.state = wire::job_state_from_name(m.state);
    if (!f.state) {
      return send_error(rid, m.request_id, wire::error_code::invalid_params,
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
  for (const auto& row : store_->jobs(f)) {
    auto s = summary_of(row, owner_name(row.owner));
    if (auto it = jobs_.find(row.id); it != jobs_.end()) s.n_gen = uint32_t(it->second.next_seq);
    if (s.error.size() > k_list_error_bytes) {
      s.error = std::string(utf8_page(s.error, 0, k_list_error_bytes)) + "...";
    }
    bytes += 256 + s.model.size() + s.node.size() + s.stop_reason.size() + s.error.size();
    if (bytes > k_list_reply_bytes) break;
    r.jobs.push_back(std::move(s));
  }
  send(rid, r);
}

void broker::on_get_job(const std::string& rid, const peer& who, const wire::get_job& m) {
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
  if (auto it = jobs_.find(m.job_id); it != jobs_.end()) {
    // A live job's output in memory is the newest record (it runs ahead of the store's).
    const live_job& j = it->second;
    r.job.summary.n_gen = uint32_t(j.next_seq);
    r.job.output = utf8_page(j.output, m.output_offset, page);
    r.output_total_bytes = j.output.size();
  } else {
    const std::string window =
        store_->read_output(m.job_id, m.output_offset, page + k_utf8_lookahead);
    const bool at_end = m.output_offset + window.size() >= row->output_bytes;
    r.job.output = utf8_page(
        window, 0, at_end ? page : std::min<uint64_t>(page, window.size() - k_utf8_lookahead));
    r.output_total_bytes = row->output_bytes;
  }
  r.job.events = store_->job_events(m.job_id);
  if (row->state == wire::job_state::queued) r.job.waiting = waiting_reason(row->model);
  r.output_offset = std::min<uint64_t>(m.output_offset, r.output_total_bytes);
  r.prompt_offset = std::min<uint64_t>(m.prompt_offset, row->prompt.size());
  r.prompt_total_bytes = row->prompt.size();
  send(rid, r);
}

void broker::on_list_nodes(const std::string& rid, const wire::list_nodes& m) {
  wire::nodes_reply r;
  r.request_id = m.request_id;
  // Capped to fit one message: online nodes first, so offline records cannot crowd them out.
  reply_list list(r, &wire::nodes_reply::nodes);
  for (bool online : {true, false}) {
    for (const auto& [name, n] : nodes_) {
      if (n.online == online) list.offer(n.summary());
    }
  }
  r.total = list.total();
  r.truncated = list.truncated();
  send(rid, r);
}

void broker::on_list_models(const std::string& rid, const wire::list_models& m) {
  std::map<std::string, wire::model_summary> models;
  for (const auto& [name, n] : nodes_) {
    for (const auto& mi : n.models) {
      auto& s = models[mi.name];
      if (s.name.empty()) {
        s.name = mi.name;
        s.architecture = mi.architecture;
        s.quantization = mi.quantization;
        s.size_bytes = mi.size_bytes;
        s.context_length = mi.context_length;
      }
      // A node that counted the parameters (an older one sends none) tells them.
      if (s.params_total == 0) {
        s.params_total = mi.params_total;
        s.params_active = mi.params_active;
      }
      if (n.online) {
        s.nodes.push_back(name);
        if (mi.loaded) s.loaded_on.push_back(name);
      }
    }
  }
  for (const auto& [model, q] : queues_) {
    auto& s = models[model];
    s.name = model;
    s.queued = uint32_t(q.size());
  }
  wire::models_reply r;
  r.request_id = m.request_id;
  // Capped to fit one message: models an online node serves or a job waits for come first.
  reply_list list(r, &wire::models_reply::models);
  for (bool in_use : {true, false}) {
    for (const auto& [name, s] : models) {
      if ((!s.nodes.empty() || s.queued > 0) == in_use) list.offer(s);
    }
  }
  r.total = list.total();
  r.truncated = list.truncated();
  // Online nodes' skipped files, at most k_max_skipped_listed in all (a node sends at most 64).
  constexpr size_t k_max_skipped_listed = 256;
  size_t listed = 0;
  for (const auto& [name, n] : nodes_) {
    if (!n.online || n.skipped.empty() || listed == k_max_skipped_listed) continue;
    const size_t take = std::min(n.skipped.size(), k_max_skipped_listed - listed);
    r.skipped.push_back({name, {n.skipped.begin(), n.skipped.begin() + ptrdiff_t(take)}});
    listed += take;
  }
  send(rid, r);
}

void broker::on_forget_node(const std::string& rid, const wire::forget_node& m) {
  if (refuse_while_storage_down(rid, m.request_id)) return;
  auto it = nodes_.find(m.name);
  if (it == nodes_.end()) {
    return send_error(rid, m.request_id, wire::error_code::not_found, "no node " + m.name);
  }
  if (it->second.online) {
    return send_error(rid, m.request_id, wire::error_code::invalid_params,
                      "node " + m.name + " is online; stop it before forgetting it");
  }
  store_->node_forget(m.name);
  nodes_.erase(it);
  // The models only it advertised are no longer known (submits for them need wait_model).
  known_models_.clear();
  for (auto& name : store_->known_models()) known_models_.insert(std::move(name));
  spdlog::info("node {} forgotten", m.name);
  send(rid, wire::ok{m.request_id});
}

void broker::on_prune_jobs(const std::string& rid, const wire::prune_jobs& m) {
  if (refuse_while_storage_down(rid, m.request_id)) return;
  if (m.max_age_ms == 0 && m.keep_last == 0) {
    return send_error(rid, m.request_id, wire::error_code::invalid_params,
                      "prune_jobs needs max_age_ms or keep_last (or both)");
  }
  // Worked through a batch per turn (prune_step), so a large history never stalls the broker.
  prunes_.push_back({rid, m.request_id, retention{m.max_age_ms, m.keep_last}, 0});
}

void broker::prune_step(net::steady::time_point now) {
  constexpr uint32_t k_batch = 500;
  if (!prunes_.empty()) {
    auto& p = prunes_.front();
    // Worked in this turn: if the turn's commit fails, it is answered storage_unavailable and
    // dropped (storage_failed), like a request of the turn.
    turn_requests_.emplace_back(p.routing_id, p.request_id);
    const uint64_t n = store_->prune(p.rule, net::wall_ms(), k_batch);
    p.pruned += n;
    if (n < k_batch) {
      spdlog::info("pruned {} finished jobs (prune_jobs)", p.pruned);
      send(p.routing_id, wire::pruned{p.request_id, p.pruned});
      prunes_.pop_front();
    }
    return;
  }
  const retention rule = broker_retention(cfg_);
  if (!rule.any() || (!retention_more_ && now < next_retention_)) return;
  // A cheap query on an index of finished jobs when there is nothing to delete.
  next_retention_ = now + std::chrono::seconds(1);
  const uint64_t n = store_->prune(rule, net::wall_ms(), k_batch);
  retention_more_ = n == k_batch;
  if (n > 0) spdlog::debug("retention: pruned {} finished jobs", n);
}

}  // namespace hearth::broker
