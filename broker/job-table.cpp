// The job state machine: queued -> running -> completed | failed | cancelled, with running ->
// queued again when an attempt is lost. Every change of a live job's state happens here.
#include "broker/job-table.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace hearth::broker {

namespace {
// "600 s", "1.5 s": an attempt timeout as its reason says it.
std::string attempt_timeout_text(std::chrono::milliseconds limit) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", double(limit.count()) / 1000);
  return buf;
}
}  // namespace

void job_table::enqueue(live_job& j) {
  j.row.state = wire::job_state::queued;
  j.output.clear();
  j.stored_bytes = 0;
  j.relayed = {};
  j.next_seq = 0;
  j.output_dirty = false;
  // A resume of the attempt that ended is over: its node must not be asked, nor blamed, again.
  j.resume = {};
  j.last_position_sent = UINT32_MAX;
  j.queued_at = net::steady::now();
  queues_.push(j);
  dispatch_needed_ = true;
}

void job_table::dispatch() {
  dispatch_needed_ = false;
  const auto runs = [](const live_job& j, const std::string& model) {
    return j.row.model == model && j.row.state == wire::job_state::running;
  };
  const auto running_of = [&](const std::string& model) {
    std::vector<live_job*> out;
    for (auto& [id, j] : jobs_)
      if (runs(j, model)) out.push_back(&j);
    return out;
  };
  const auto repairs = pipelines_.repair([&](const std::string& model) {
    return std::any_of(jobs_.begin(), jobs_.end(),
                       [&](const auto& kv) { return runs(kv.second, model); });
  });
  // A split model's stage moved: its running jobs' histories say where they go on.
  for (const std::string& model : repairs.moved) {
    const pipeline* p = pipelines_.of(model);
    for (live_job* j : running_of(model))
      store_.job_noted(j->row.id, j->row.attempts, "", "stages", p->describe(), net::wall_ms());
  }
  // A split model planned again: its running attempts cannot go on (their stages are gone) and
  // run again on the new plan. Neither the node's fault nor the job's: counted as a hand-back.
  for (const auto& [model, why] : repairs.dissolved) {
    for (live_job* j : running_of(model)) {
      if (node_entry* n = nodes_.find(j->row.node)) {
        if (n->online) out_.send(n->routing_id, wire::job_cancel{j->row.id, j->row.attempts});
        n->running.erase(j->row.id);
      }
      spdlog::warn("job {} attempt {} is taken back: {}", j->row.id, j->row.attempts, why);
      requeue(*j, why, loss::handback);
    }
  }
  const auto now = net::steady::now();
  const auto window = std::chrono::milliseconds(cfg_.quarantine_window_ms);
  // Repeatedly: the best queued job (priority, then age) over all models whose model some node
  // with credit serves goes to the best such node (node-match.h: by what the nodes did, not what
  // they claim). Few models, few nodes: a linear scan is fine.
  while (queues_.size() > 0) {
    live_job* best = nullptr;
    node_entry* best_node = nullptr;
    for (const auto& [model, q] : queues_.by_model()) {
      if (q.empty()) continue;
      const auto& head = *q.begin();
      if (best && job_queues::key(*best) < head) continue;
      // A job of n choices needs a node of n slots (a smaller one would fail it as its fault);
      // until one comes the model's queue waits behind it, and says why (waiting_reason).
      const uint32_t slots = choices_of(jobs_.at(head.second).row.params);
      node_entry* pick = nullptr;
      const pipeline* p = pipelines_.of(model);
      if (!p && !nodes_.healthy_node_holds(model)) p = pipelines_.plan_for(model);
      if (p) {
        // A split model runs on its pipeline: its last stage's node, when it can take a job.
        node_entry* d = nodes_.find(p->driver());
        if (d && d->online && !d->quarantined(now) && d->free_credit() > 0 && d->slots >= slots)
          pick = d;
      } else {
        pick = best_node_for(nodes_.nodes(), model, now, window, slots);
      }
      if (!pick) continue;
      best = &jobs_.at(head.second);
      best_node = pick;
    }
    if (!best) return;
    assign(*best, *best_node);
  }
}

void job_table::assign(live_job& j, node_entry& n) {
  queues_.erase(j);
  --n.credit;
  n.running.insert(j.row.id);

  j.row.state = wire::job_state::running;
  j.row.node = n.name;
  j.row.attempts += 1;
  j.output.clear();
  j.stored_bytes = 0;
  j.relayed = {};
  j.next_seq = 0;
  j.recovered_attempt = false;
  j.resume = {};
  j.assigned_at = net::steady::now();
  j.attempt_started = false;
  j.attempt_progress = j.assigned_at;
  store_.job_assigned(j.row.id, j.row.attempts, n.name, net::wall_ms());
  turn_metrics_.observe(metric::job_queue_wait, {j.row.model},
                        std::chrono::duration<double>(net::steady::now() - j.queued_at).count());

  wire::job_assign a;
  a.job_id = j.row.id;
  a.attempt = j.row.attempts;
  a.model = j.row.model;
  a.prompt = j.row.prompt;
  a.messages = j.row.messages;
  a.params = j.row.params;
  if (const pipeline* p = pipelines_.of(j.row.model)) {
    a.pipeline_id = p->id;
    // Which nodes hold which layers for this attempt: `hearth job` shows it.
    store_.job_noted(j.row.id, j.row.attempts, "", "stages", p->describe(), net::wall_ms());
  }
  out_.send(n.routing_id, a);
  if (!j.watchers.empty()) {
    relay_.notify(j, wire::command::job_running,
                  wire::encode(wire::job_running{j.row.id, j.row.attempts, n.name}));
  }
}

void job_table::requeue(live_job& j, const std::string& why, loss cause) {
  if (j.cancel_requested) {
    finish(j, wire::job_state::cancelled, "cancelled", "", j.row.n_prompt, uint32_t(j.next_seq));
    return;
  }
  const int64_t now = net::wall_ms();
  // A lost attempt is the node's doing when another node could have run the job; only when none
  // could (every node serving the model lost it, or is gone) may the job itself be the cause.
  if (cause != loss::node || nodes_.healthy_node_serves(j.row.model, j.row.node)) ++j.forgiven;
  // Forgiven attempts are bounded too, so no job is passed around for ever.
  const uint64_t max_total_attempts = 4 * uint64_t(cfg_.max_attempts);
  const uint32_t counted = j.row.attempts - std::min(j.forgiven, j.row.attempts);
  if (counted >= cfg_.max_attempts || j.row.attempts >= max_total_attempts) {
    spdlog::warn("job {} failed after {} attempts: {}", j.row.id, j.row.attempts, why);
    finish(j, wire::job_state::failed, "",
           "gave up after " + std::to_string(j.row.attempts) + " attempts; last: " + why,
           j.row.n_prompt, 0);
    return;
  }
  spdlog::info("job {} attempt {} is queued again: {}", j.row.id, j.row.attempts, why);
  store_.job_requeued(j.row.id, j.row.attempts, j.row.node, why, now);
  turn_metrics_.add(metric::requeues, {cause == loss::node       ? "node"
                                       : cause == loss::handback ? "handback"
                                                                 : "broker_restart"});
  j.recovered_deadline.reset();
  enqueue(j);
  if (!j.watchers.empty()) {
    relay_.notify(j, wire::command::job_restarted,
                  wire::encode(wire::job_restarted{j.row.id, j.row.attempts + 1, why}));
  }
}

void job_table::attempt_timers(net::steady::time_point now) {
  const auto start_limit = std::chrono::milliseconds(cfg_.attempt_start_timeout_ms);
  const auto stall_limit = std::chrono::milliseconds(cfg_.attempt_stall_timeout_ms);
  for (auto& [id, j] : jobs_) {
    // After a restart the node has its own grace period (recovered_deadline).
    if (j.row.state != wire::job_state::running || j.recovered_deadline) continue;
    const auto limit = j.attempt_started ? stall_limit : start_limit;
    if (now - j.attempt_progress <= limit) continue;
    node_entry* found = nodes_.find(j.row.node);
    if (!found || !found->online) continue;  // node_lost requeues it
    node_entry& n = *found;
    const std::string why = j.attempt_started
                                ? "node " + n.name + " sent nothing of it for " +
                                      attempt_timeout_text(limit) + " (attempt_stall_timeout_ms)"
                                : "node " + n.name + " did not start it within " +
                                      attempt_timeout_text(limit) + " (attempt_start_timeout_ms)";
    spdlog::warn("job {} attempt {} is taken back: {}", id, j.row.attempts, why);
    out_.send(n.routing_id, wire::job_cancel{id, j.row.attempts});
    n.running.erase(id);
    attempt_lost(n, j, why);
  }
}

void job_table::finish(live_job& j, wire::job_state state, const std::string& stop_reason,
                       const std::string& error, uint32_t n_prompt, uint32_t n_gen) {
  if (j.row.state == wire::job_state::queued) queues_.erase(j);
  if (node_entry* n = nodes_.find(j.row.node)) n->running.erase(j.row.id);
  j.row.state = state;
  j.row.stop_reason = stop_reason;
  j.row.error = error;
  j.row.n_prompt = n_prompt;
  j.row.n_gen = n_gen;
  j.row.finished_ms = net::wall_ms();
  // The output first: the store keeps a finished job's output as it is.
  flush_output(j);
  store_.job_finished(j.row.id, j.row.attempts, j.row.node, state, stop_reason, error, n_prompt,
                      n_gen, j.row.finished_ms);
  const std::string state_name(wire::job_state_name(state));
  turn_metrics_.add(metric::jobs_finished, {j.row.model, state_name});
  turn_metrics_.observe(metric::job_duration, {j.row.model, state_name},
                        double(j.row.finished_ms - j.row.created_ms) / 1000);
  wire::job_done d;
  d.job_id = j.row.id;
  d.attempt = j.row.attempts;
  d.state = state;
  d.stop_reason = stop_reason;
  d.error = error;
  d.n_prompt = n_prompt;
  d.n_gen = n_gen;
  if (!j.watchers.empty()) relay_.notify(j, wire::command::job_done, wire::encode(d));
  // The entry is erased at the end of the turn, after any message of the turn that refers to it.
  finished_.push_back(j.row.id);
}

void job_table::attempt_lost(node_entry& n, live_job& j, const std::string& why) {
  if (j.recovered_attempt) {
    requeue(j, why, loss::broker_restart);
    return;
  }
  nodes_.lost_attempt(n, j.row.id, j.row.attempts, why);
  requeue(j, why);
}

void job_table::flush_output(live_job& j) {
  if (!j.output_dirty) return;
  const std::string_view fresh = std::string_view(j.output).substr(j.stored_bytes);
  store_.append_output(j.row.id, j.stored_bytes, fresh, uint32_t(j.next_seq));
  j.stored_bytes = j.output.size();
  j.output_dirty = false;
}

void job_table::erase_finished() {
  // Finished jobs leave memory at the end of the turn that finished them.
  for (uint64_t id : finished_) {
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      usage_.release(it->second);
      jobs_.erase(it);
    }
  }
  finished_.clear();
}

void job_table::load() {
  // Running jobs stay with their node for one liveness period, waiting for it to reconnect and
  // list them; queued ones go back in the queue.
  const auto grace = std::chrono::milliseconds(int64_t(cfg_.heartbeat_ms) * cfg_.liveness);
  size_t n_running = 0;
  for (auto& row : store_.unfinished_jobs()) {
    live_job j;
    const uint64_t id = row.id;
    j.row = std::move(row);
    j.next_seq = j.row.n_gen;
    auto& live = jobs_[id] = std::move(j);
    usage_.add(live);
    if (live.row.state == wire::job_state::queued) {
      enqueue(live);
    } else {
      live.output = store_.read_output(id, 0, live.row.output_bytes);
      live.stored_bytes = live.output.size();
      live.relayed = {live.next_seq, live.stored_bytes};
      live.recovered_deadline = net::steady::now() + grace;
      live.recovered_attempt = true;
      if (node_entry* n = nodes_.find(live.row.node)) n->running.insert(id);
      ++n_running;
    }
  }
  if (!jobs_.empty()) {
    spdlog::info("loaded {} queued and {} running jobs from {}", queues_.size(), n_running,
                 cfg_.db);
  }
}

live_job* job_table::find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void job_table::note(uint64_t id, const std::string& event, const std::string& detail) {
  if (live_job* j = find(id)) {
    // No node: it is no attempt's event (hearth job sums attempts up by their node's events).
    store_.job_noted(id, j->row.attempts, "", event, detail, net::wall_ms());
  }
}

live_job& job_table::add(job_row row) {
  const uint64_t id = row.id;
  live_job& j = jobs_[id];
  j.row = std::move(row);
  usage_.add(j);
  enqueue(j);
  return j;
}

void job_table::clear() {
  jobs_.clear();
  queues_.clear();
  usage_.clear();
}

void job_table::flush_all() {
  for (auto& [id, j] : jobs_) flush_output(j);
}

}  // namespace hearth::broker
