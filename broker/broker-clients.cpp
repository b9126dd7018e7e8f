// The client side of the broker: submissions, watching, cancelling and history queries.
#include <spdlog/spdlog.h>

#include <random>

#include "broker/broker.h"
#include "broker/reply-list.h"
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

void broker::on_submit(const std::string& rid, const peer& who, wire::submit m) {
  using wire::error_code;
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
    return send_error(rid, m.request_id, error_code::unknown_model,
                      "no node has ever offered model '" + m.model +
                          "' (known: " + (known.empty() ? "none" : known) +
                          "; submit with wait_model to queue it anyway)");
  }
  if (n_queued_ >= cfg_.max_queue) {
    return send_error(rid, m.request_id, error_code::queue_full,
                      "the queue is full (" + std::to_string(cfg_.max_queue) + " jobs waiting)");
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
  const uint64_t id = store_->insert_job(row, row.created_ms);
  live_job& j = jobs_[id];
  j.row = std::move(row);
  j.row.id = id;
  enqueue(j);
  if (m.watch) j.watchers.insert(rid);
  const uint32_t position = queue_position(j);
  j.last_position_sent = position;
  send(rid, wire::accepted{m.request_id, id, position});
}

void broker::on_watch(const std::string& rid, const peer& who, const wire::watch& m) {
  std::optional<job_row> stored;
  const job_row* row = visible_job(rid, who, m.request_id, m.job_id, stored);
  if (!row) return;
  if (auto it = jobs_.find(m.job_id); it != jobs_.end()) {
    live_job& j = it->second;
    j.watchers.insert(rid);
    send(rid, wire::ok{m.request_id});
    if (j.row.state == wire::job_state::queued) {
      j.last_position_sent = queue_position(j);
      send(rid, wire::job_queued{j.row.id, j.last_position_sent});
    } else if (j.row.state == wire::job_state::running) {
      send(rid, wire::job_running{j.row.id, j.row.attempts, j.row.node});
      if (j.next_seq > 0) {
        send(rid,
             wire::job_tokens{j.row.id, j.row.attempts, 0, uint32_t(j.next_seq), j.row.output});
      }
    }
    return;
  }
  send(rid, wire::ok{m.request_id});
  if (!row->output.empty() || row->n_gen > 0) {
    send(rid, wire::job_tokens{row->id, row->attempts, 0, row->n_gen, row->output});
  }
  send(rid, wire::job_done{row->id, row->attempts, row->state, row->stop_reason, row->error,
                           row->n_prompt, row->n_gen});
}

void broker::on_cancel(const std::string& rid, const peer& who, const wire::cancel& m) {
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
             "job " + std::to_string(m.job_id) + " has already " +
                 std::string(wire::job_state_name(row->state)));
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
  for (const auto& row : store_->jobs(f)) {
    auto s = summary_of(row, owner_name(row.owner));
    if (auto it = jobs_.find(row.id); it != jobs_.end()) s.n_gen = uint32_t(it->second.next_seq);
    r.jobs.push_back(std::move(s));
  }
  send(rid, r);
}

void broker::on_get_job(const std::string& rid, const peer& who, const wire::get_job& m) {
  std::optional<job_row> stored;
  if (!visible_job(rid, who, m.request_id, m.job_id, stored)) return;
  auto row = stored ? std::move(stored) : store_->job(m.job_id);
  if (!row) {
    return send_error(rid, m.request_id, wire::error_code::not_found,
                      "no job " + std::to_string(m.job_id));
  }
  if (auto it = jobs_.find(m.job_id); it != jobs_.end()) {
    row->output = it->second.row.output;
    row->n_gen = uint32_t(it->second.next_seq);
  }
  wire::job_reply r;
  r.request_id = m.request_id;
  r.job.summary = summary_of(*row, owner_name(row->owner));
  r.job.prompt = row->prompt;
  r.job.messages = row->messages;
  r.job.params = row->params;
  r.job.output = row->output;
  r.job.events = store_->job_events(m.job_id);
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
  send(rid, r);
}

void broker::on_forget_node(const std::string& rid, const wire::forget_node& m) {
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

}  // namespace hearth::broker
