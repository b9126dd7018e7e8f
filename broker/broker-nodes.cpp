// The node side of the broker: hello and reconciliation, credit, stream relay, results, loss.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "broker/broker.h"
#include "common/format-ago.h"
#include "schema/job-params.h"

namespace hearth::broker {

node_entry* broker::node_by_routing_id(const std::string& rid) {
  auto it = node_by_rid_.find(rid);
  if (it == node_by_rid_.end()) return nullptr;
  return &nodes_.at(it->second);
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

void broker::store_node(const node_entry& n) {
  store_->node_upsert(n.summary());
}

namespace {
// A registration (node_hello, or node_status's model list) larger than this is refused: it bounds
// what one node adds to the broker's memory and to each nodes_reply and models_reply.
constexpr size_t k_max_registration_bytes = 1 << 20;
constexpr size_t k_max_node_name_bytes = 255;
// A job_resume whose stream still has a gap is sent again after this long; after this many
// without the stream advancing, the attempt is abandoned.
constexpr auto k_resume_retry = std::chrono::seconds(2);
constexpr uint32_t k_max_resumes = 5;
// A loss's reason as node_summary keeps it: a node's own error text may be long. Cut before a
// character, not inside one (the JSON of `hearth nodes --json` and the gateway needs UTF-8).
std::string loss_reason(const std::string& why) {
  constexpr size_t k_max_bytes = 512;
  if (why.size() <= k_max_bytes) return why;
  size_t cut = k_max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(why[cut]) & 0xc0) == 0x80) --cut;
  return why.substr(0, cut) + "...";
}
// Stop reasons of a job_final failed that say the request is at fault (it fails on any node):
// anything else failed is the node's doing (a model that does not load there, an engine error).
bool final_blames_request(const std::string& stop_reason) {
  return stop_reason == wire::stop_reason_prompt_too_long ||
         stop_reason == wire::stop_reason_invalid_request;
}
}  // namespace

bool broker::hello_admitted(const std::string& rid) {
  const auto now = net::steady::now();
  if (!hello_bucket_) {
    hello_bucket_.emplace(cfg_.hello_rate, cfg_.hello_burst, now);
  }
  auto peer = hello_peer_buckets_.try_emplace(rid, cfg_.hello_rate_per_peer,
                                              cfg_.hello_burst_per_peer, now);
  std::string why;
  if (!peer.first->second.take(now)) {
    why = "more than " + std::to_string(cfg_.hello_rate_per_peer) +
          " node_hello per second from this connection";
  } else if (!hello_bucket_->take(now)) {
    why = "more than " + std::to_string(cfg_.hello_rate) +
          " node_hello per second from all connections";
  } else {
    return true;
  }
  send_error(rid, 0, wire::error_code::limit_reached, why + "; try again later");
  // A flood must not become a flood of log lines.
  if (auto more = hello_log_.admit(now)) spdlog::warn("refused a node_hello: {}{}", why, *more);
  return false;
}

void broker::on_node_hello(const std::string& rid, const peer& who, wire::node_hello m) {
  if (!hello_admitted(rid)) return;
  if (m.version != wire::protocol_version) {
    send_error(rid, 0, wire::error_code::version_mismatch,
               "node protocol version " + std::to_string(m.version) + " is not supported");
    return;
  }
  if (m.name.empty() || m.slots == 0) {
    send_error(rid, 0, wire::error_code::malformed, "node_hello needs a name and slots >= 1");
    return;
  }
  if (m.name.size() > k_max_node_name_bytes || m.hostname.size() > k_max_node_name_bytes) {
    send_error(rid, 0, wire::error_code::malformed,
               "node_hello: name and hostname are at most 255 bytes");
    return;
  }
  if (const size_t bytes = wire::encode(m).size(); bytes > k_max_registration_bytes) {
    send_error(rid, 0, wire::error_code::limit_reached,
               "node_hello is " + std::to_string(bytes) + " bytes; at most " +
                   std::to_string(k_max_registration_bytes) + " (advertise fewer models)");
    return;
  }
  auto it = nodes_.find(m.name);
  if (it == nodes_.end() && nodes_.size() >= cfg_.max_nodes) {
    send_error(rid, 0, wire::error_code::limit_reached,
               "the broker has " + std::to_string(nodes_.size()) +
                   " nodes registered (max_nodes); forget offline ones with `hearth nodes forget`");
    return;
  }
  // One node key owns a bounded share of the records, so that it cannot lock the others out.
  // Without auth every peer is trusted (an admin): max_nodes alone bounds them.
  if (it == nodes_.end() && !who.key.empty()) {
    const auto owned = size_t(std::count_if(
        nodes_.begin(), nodes_.end(), [&](const auto& kv) { return kv.second.key == who.key; }));
    if (owned >= cfg_.max_nodes_per_key) {
      send_error(rid, 0, wire::error_code::limit_reached,
                 "this node key has " + std::to_string(owned) +
                     " nodes registered (max_nodes_per_key); forget offline ones with `hearth "
                     "nodes forget`");
      return;
    }
  }
  // With auth a name belongs to the key that first used it: another key cannot take it over,
  // whatever it claims about itself (forget the node to free the name).
  if (it != nodes_.end() && !who.key.empty() && !it->second.key.empty() &&
      it->second.key != who.key) {
    spdlog::warn("refused node '{}' from key '{}': the name belongs to another node key", m.name,
                 who.name);
    send_error(rid, 0, wire::error_code::name_taken,
               "the name " + m.name + " is in use by another node key; choose --name");
    return;
  }
  if (it != nodes_.end() && it->second.online && it->second.routing_id != rid) {
    // A node that reconnects after a network failure says hello from a new socket before the
    // old one is declared dead; the same hostname means it is the same machine. Two machines
    // sharing one name (cloned VMs, Raspberry Pis all called "raspberrypi") are refused instead
    // of knocking each other off.
    if (it->second.hostname != m.hostname) {
      spdlog::warn("refused node '{}' from {}: a node of that name is connected from {}", m.name,
                   m.hostname, it->second.hostname);
      send_error(rid, 0, wire::error_code::name_taken,
                 "the name " + m.name + " is in use by a node connected from " +
                     it->second.hostname + "; choose --name");
      return;
    }
    // The same machine, but another node process (two `hearth-node --name X` on one host): the
    // established one keeps the name while it is heard from, instead of the two knocking each
    // other off for ever. One silent for two heartbeat intervals may be a killed process whose
    // restart this is, and is replaced.
    const auto alive = std::chrono::milliseconds(2 * int64_t(cfg_.heartbeat_ms));
    if (m.instance != 0 && it->second.instance != 0 && m.instance != it->second.instance &&
        net::steady::now() - it->second.last_heard < alive) {
      spdlog::warn("refused node '{}': another node process on {} is connected with that name",
                   m.name, m.hostname);
      send_error(rid, 0, wire::error_code::name_taken,
                 "the name " + m.name + " is in use by another node process on " + m.hostname +
                     "; choose --name");
      return;
    }
    node_by_rid_.erase(it->second.routing_id);
  }
  node_entry& n = nodes_[m.name];
  if (!n.routing_id.empty()) node_by_rid_.erase(n.routing_id);
  if (!who.key.empty()) n.key = who.key;
  n.name = m.name;
  n.routing_id = rid;
  n.hostname = m.hostname;
  n.engine = m.engine;
  n.instance = m.instance;
  if (m.slots > cfg_.max_node_slots && m.slots != n.declared_slots) {
    spdlog::warn("node {} declares {} slots; it gets at most {} (max_node_slots)", m.name, m.slots,
                 cfg_.max_node_slots);
  }
  n.declared_slots = m.slots;
  n.slots = std::min(m.slots, cfg_.max_node_slots);
  n.hardware = std::move(m.hardware);
  n.models = std::move(m.models);
  n.skipped = std::move(m.skipped);
  n.online = true;
  n.last_heard = net::steady::now();
  n.last_seen_ms = net::wall_ms();
  n.last_stored = n.last_heard;
  node_by_rid_[rid] = n.name;
  for (const auto& model : n.models) known_models_.insert(model.name);

  // Reconcile: attempts the node still runs (or holds, finished) and the broker still gives it
  // continue from the broker's count of their tokens, since chunks and finals sent while the
  // connection was down (or the broker restarting) are lost; the node drops the others; the
  // broker requeues what it gave the node and the node no longer has.
  std::set<uint64_t> listed;
  std::vector<wire::job_resume> resumes;
  for (const auto& ref : m.running) {
    auto j = jobs_.find(ref.job_id);
    const bool ours = j != jobs_.end() && j->second.row.state == wire::job_state::running &&
                      j->second.row.node == n.name && j->second.row.attempts == ref.attempt;
    if (ours) {
      live_job& lj = j->second;
      listed.insert(ref.job_id);
      lj.recovered_deadline.reset();
      resumes.push_back({ref.job_id, ref.attempt, lj.next_seq});
      // Not counted as unanswered: the node may have nothing past next_seq, and then says
      // nothing. A chunk past next_seq meanwhile makes it count (resume_timer).
      lj.resume.outstanding = true;
      lj.resume.gap = false;
      lj.resume.sent = net::steady::now();
      lj.attempt_progress = lj.resume.sent;
    } else {
      send(rid, wire::job_cancel{ref.job_id, ref.attempt});
    }
  }
  for (uint64_t id : std::set<uint64_t>(n.running)) {
    if (listed.contains(id)) continue;
    n.running.erase(id);
    if (auto j = jobs_.find(id); j != jobs_.end()) {
      attempt_lost(n, j->second, "node " + n.name + " reconnected without the job");
    }
  }
  n.credit = 0;  // the node grants credit with node_pull once welcomed
  store_node(n);
  send(rid, wire::node_welcome{wire::protocol_version, cfg_.heartbeat_ms, cfg_.liveness});
  for (const auto& r : resumes) send(rid, r);
  spdlog::info("node {} ({}, {} engine, {} slots, {} models) is online", n.name, n.hostname,
               n.engine, n.slots, n.models.size());
  dispatch_needed_ = true;
}

void broker::on_node_pull(node_entry& n, const wire::node_pull& m) {
  // Credit and running attempts together stay within its slots, whatever it asks for.
  n.credit = uint32_t(std::min<uint64_t>(uint64_t(n.credit) + m.credit, n.free_slots()));
  dispatch_needed_ = true;
}

void broker::on_node_status(node_entry& n, wire::node_status m) {
  if (const size_t bytes = wire::encode(m).size(); bytes > k_max_registration_bytes) {
    spdlog::warn("node {}: ignored a node_status of {} bytes (at most {})", n.name, bytes,
                 k_max_registration_bytes);
    return;
  }
  n.models = std::move(m.models);
  n.skipped = std::move(m.skipped);
  // An older node sends no hardware (cpu_threads 0): the hello's stays.
  if (m.hardware.cpu_threads > 0) n.hardware = std::move(m.hardware);
  for (const auto& model : n.models) known_models_.insert(model.name);
  store_node(n);
  dispatch_needed_ = true;
}

namespace {
// The live job for an attempt this node runs, or nullptr when the message is stale (an older
// attempt, a job moved elsewhere, a finished job).
template <class Jobs>
live_job* current_attempt(Jobs& jobs, const node_entry& n, uint64_t job_id, uint32_t attempt) {
  auto it = jobs.find(job_id);
  if (it == jobs.end()) return nullptr;
  live_job& j = it->second;
  if (j.row.state != wire::job_state::running || j.row.node != n.name ||
      j.row.attempts != attempt) {
    return nullptr;
  }
  return &j;
}
}  // namespace

void broker::on_job_started(node_entry& n, const wire::job_started& m) {
  live_job* j = current_attempt(jobs_, n, m.job_id, m.attempt);
  if (!j) return;
  j->row.n_prompt = m.n_prompt;
  j->row.started_ms = net::wall_ms();
  j->attempt_started = true;
  j->attempt_progress = net::steady::now();
  // The node's model load for this attempt, in the timeline (hearth job's "node start"), so
  // that the time between assignment and start is not taken for queueing or slow tokens.
  std::string detail;
  if (m.load_ms > 0 && m.load_ms < 1e9) {
    char buf[48];
    if (m.load_ms < 1000) {
      std::snprintf(buf, sizeof buf, "model load %.0f ms", m.load_ms);
    } else {
      std::snprintf(buf, sizeof buf, "model load %.2f s", m.load_ms / 1000);
    }
    detail = buf;
  }
  store_->job_started(m.job_id, m.attempt, n.name, m.n_prompt, j->row.started_ms, detail);
}

void broker::on_job_tokens(node_entry& n, const wire::job_tokens& m, std::string_view body) {
  live_job* j = current_attempt(jobs_, n, m.job_id, m.attempt);
  if (!j) return;
  if (m.seq < j->next_seq) return;  // a duplicate
  if (m.seq > j->next_seq) {
    // Tokens were lost (the connection dropped, the broker restarted mid-stream): the node sends
    // them again. Later chunks are ignored until they come.
    if (j->resume.outstanding) {
      j->resume.gap = true;
      return;
    }
    resume_stream(n, *j,
                  "tokens " + std::to_string(j->next_seq) + ".." + std::to_string(m.seq - 1) +
                      " of the stream were lost");
    return;
  }
  std::string wrong;
  if (m.n_tokens == 0 && !m.text.empty()) {
    // Text must come with its tokens: a chunk without any would let a node grow the output
    // without advancing the stream, and a resume could not tell where it belongs.
    wrong = "node " + n.name + " sent text without tokens";
  } else if (m.seq + m.n_tokens > uint64_t(std::max(j->row.params.max_tokens, 0))) {
    // No attempt generates more than its max_tokens: a count beyond is not the job's output.
    wrong = "node " + n.name + " sent tokens " + std::to_string(m.seq) + ".." +
            std::to_string(m.seq + m.n_tokens - 1) + " of a job of at most " +
            std::to_string(j->row.params.max_tokens) + " tokens (max_tokens)";
  }
  if (!wrong.empty()) {
    send(n.routing_id, wire::job_cancel{m.job_id, m.attempt});
    n.running.erase(m.job_id);
    node_lost_attempt(n, *j, wrong);
    requeue(*j, wrong);
    return;
  }
  if (j->output.size() + m.text.size() > cfg_.max_output_bytes) {
    send(n.routing_id, wire::job_cancel{m.job_id, m.attempt});
    n.running.erase(m.job_id);
    spdlog::warn("job {}: its output would pass max_output_bytes ({} bytes); it is stopped",
                 m.job_id, cfg_.max_output_bytes);
    finish(*j, wire::job_state::failed, "output_too_large",
           "output_too_large: the output passed max_output_bytes (" +
               std::to_string(cfg_.max_output_bytes) + " bytes); what came before is kept",
           j->row.n_prompt, uint32_t(j->next_seq));
    return;
  }
  j->resume.outstanding = false;
  if (m.n_tokens > 0) j->resume.unanswered = 0;
  j->attempt_progress = net::steady::now();
  j->output += m.text;
  j->next_seq = m.seq + m.n_tokens;
  j->output_dirty = true;
  if (m.n_tokens > 0) {
    turn_metrics_.add(metric::tokens_generated, {j->row.model, n.name}, m.n_tokens);
    n.count_tokens(net::steady::now(), m.n_tokens);
    if (!j->first_token_seen) {
      j->first_token_seen = true;
      turn_metrics_.observe(metric::job_first_token, {j->row.model},
                            double(net::wall_ms() - j->row.created_ms) / 1000);
    }
  }
  if (j->watchers.empty() || j->relayed.seq <= m.seq) {
    notify(*j, wire::command::job_tokens, std::string(body));
  } else if (j->output.size() > j->relayed.byte) {
    // Re-sent after a reload: the watchers have this chunk's beginning already, so they get the
    // rest as a chunk at the seq they expect (PROTOCOL.md section 11).
    notify(*j, wire::command::job_tokens,
           wire::encode(wire::job_tokens{m.job_id, m.attempt, j->relayed.seq,
                                         uint32_t(j->next_seq - j->relayed.seq),
                                         j->output.substr(j->relayed.byte)}));
  }
  if (j->next_seq > j->relayed.seq) {
    relayed_before_turn_.try_emplace(m.job_id, j->relayed);
    j->relayed = {j->next_seq, j->output.size()};
  }
}

void broker::on_job_final(node_entry& n, const wire::job_final& m) {
  live_job* j = current_attempt(jobs_, n, m.job_id, m.attempt);
  if (!j) return;
  if (m.n_gen > j->next_seq && m.state == wire::job_state::completed) {
    // The end of the stream was lost: the node sends it again, then this final again.
    if (j->resume.outstanding) {
      j->resume.gap = true;
      return;
    }
    resume_stream(
        n, *j,
        "the stream ended with " + std::to_string(m.n_gen - j->next_seq) + " tokens missing");
    return;
  }
  n.running.erase(m.job_id);
  if (m.n_gen != j->next_seq && m.state == wire::job_state::completed) {
    const std::string why = "the final counts " + std::to_string(m.n_gen) + " tokens, the stream " +
                            std::to_string(j->next_seq);
    attempt_lost(n, *j, why);
    return;
  }
  if (m.state != wire::job_state::completed && m.state != wire::job_state::failed &&
      m.state != wire::job_state::cancelled) {
    spdlog::warn("node {} reported job {} as {}; treating it as failed", n.name, m.job_id,
                 wire::job_state_name(m.state));
  }
  const wire::job_state state =
      wire::job_state_is_final(m.state) ? m.state : wire::job_state::failed;
  // The model's file changed under the node: neither the job's fault nor the engine's, so it is
  // taken as the hand-back it is (the job runs again, not counted toward max_attempts).
  if (!j->cancel_requested && state == wire::job_state::failed &&
      m.stop_reason == wire::stop_reason_model_changed) {
    return handed_back(n, *j, m.error);
  }
  // A failure of the node's own (not of the request), or a cancel nobody asked for, is a lost
  // attempt like a node that died: another node runs the job, and this one is held to account.
  // (Its error goes into the job's events on every attempt: bounded.)
  if (!j->cancel_requested &&
      ((state == wire::job_state::failed && !final_blames_request(m.stop_reason)) ||
       state == wire::job_state::cancelled)) {
    const std::string why =
        "node " + n.name +
        (state == wire::job_state::failed ? " failed it: " + loss_reason(m.error)
                                          : " cancelled it unasked");
    node_lost_attempt(n, *j, why);
    requeue(*j, why);
    return;
  }
  if (state == wire::job_state::completed) {
    n.measure(uint32_t(j->next_seq),
              std::chrono::duration<double>(net::steady::now() - j->assigned_at).count());
  }
  j->row.n_prompt = m.n_prompt;
  finish(*j, state, m.stop_reason, m.error, m.n_prompt, uint32_t(j->next_seq));
}

void broker::on_job_handback(node_entry& n, const wire::job_handback& m) {
  live_job* j = current_attempt(jobs_, n, m.job_id, m.attempt);
  if (!j) return;
  n.running.erase(m.job_id);
  handed_back(n, *j, m.reason);
}

void broker::handed_back(node_entry& n, live_job& j, const std::string& reason) {
  // A hand-back is not the job's fault: it does not count against max_attempts. It does count
  // against the node, or a node could take jobs and hand them back for ever.
  const std::string why = "node " + n.name + " handed it back: " + loss_reason(reason);
  node_lost_attempt(n, j, why, /*handback=*/true);
  requeue(j, why, loss::handback);
}

void broker::resume_stream(node_entry& n, live_job& j, const std::string& why) {
  if (j.resume.unanswered >= k_max_resumes) {
    abandon_stream(
        n, j, why + " (" + std::to_string(k_max_resumes) + " job_resume did not bring them back)");
    return;
  }
  spdlog::info("job {} attempt {}: {}; asking node {} to send the stream again from token {}",
               j.row.id, j.row.attempts, why, n.name, j.next_seq);
  send(n.routing_id, wire::job_resume{j.row.id, j.row.attempts, j.next_seq});
  j.resume.outstanding = true;
  j.resume.gap = true;
  j.resume.sent = net::steady::now();
  ++j.resume.unanswered;
}

void broker::resume_timer(live_job& j, net::steady::time_point now) {
  // A resume of an attempt that has ended since (the job was queued again) is over.
  if (j.row.state != wire::job_state::running) {
    j.resume = {};
    return;
  }
  if (!j.resume.gap || now - j.resume.sent < k_resume_retry) return;
  auto n = nodes_.find(j.row.node);
  if (n == nodes_.end() || !n->second.online) return;  // node_lost requeues it
  j.resume.outstanding = false;
  resume_stream(n->second, j,
                "job_resume unanswered for " + std::to_string(k_resume_retry.count()) + " s");
}

void broker::abandon_stream(node_entry& n, live_job& j, const std::string& why) {
  send(n.routing_id, wire::job_cancel{j.row.id, j.row.attempts});
  n.running.erase(j.row.id);
  attempt_lost(n, j, why);
}

void broker::attempt_lost(node_entry& n, live_job& j, const std::string& why) {
  if (j.recovered_attempt) {
    requeue(j, why, loss::broker_restart);
    return;
  }
  node_lost_attempt(n, j, why);
  requeue(j, why);
}

void broker::node_lost(node_entry& n, const std::string& why) {
  n.online = false;
  n.credit = 0;
  node_by_rid_.erase(n.routing_id);
  n.routing_id.clear();
  store_->node_seen(n.name, false, n.last_seen_ms);
  for (uint64_t id : std::set<uint64_t>(n.running)) {
    if (auto j = jobs_.find(id); j != jobs_.end()) {
      node_lost_attempt(n, j->second, why);
      requeue(j->second, why);
    }
  }
  n.running.clear();
}

void broker::node_lost_attempt(node_entry& n, const live_job& j, const std::string& why,
                               bool handback) {
  ++n.lost;
  n.last_losses.push_back({net::wall_ms(), j.row.id, j.row.attempts, loss_reason(why)});
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
  const auto window = std::chrono::milliseconds(cfg_.quarantine_window_ms);
  n.recent_losses.push_back(now);
  while (!n.recent_losses.empty() && n.recent_losses.front() < now - window) {
    n.recent_losses.pop_front();
  }
  if (n.recent_losses.size() < cfg_.quarantine_after) return;
  // A repeat within the longest quarantine of the last one's end doubles the time.
  const auto max = std::chrono::milliseconds(broker_config::max_quarantine_ms);
  const bool repeat = n.quarantine_level > 0 && now - n.quarantine_end < max;
  n.quarantine_level = repeat ? std::min<uint32_t>(n.quarantine_level + 1, 20) : 1;
  const int64_t ms = std::min<int64_t>(int64_t(cfg_.quarantine_ms) << (n.quarantine_level - 1),
                                       broker_config::max_quarantine_ms);
  n.quarantine_end = now + std::chrono::milliseconds(ms);
  n.quarantined_until_ms = net::wall_ms() + ms;
  spdlog::warn("node {} is quarantined for {} s: it lost {} attempts within {} s (last: {})",
               n.name, ms / 1000.0, n.recent_losses.size(), cfg_.quarantine_window_ms / 1000.0,
               why);
  n.recent_losses.clear();
}

void broker::on_release_node(const std::string& rid, const wire::release_node& m) {
  auto it = nodes_.find(m.name);
  if (it == nodes_.end()) {
    return send_error(rid, m.request_id, wire::error_code::not_found, "no node " + m.name);
  }
  node_entry& n = it->second;
  const bool was = n.quarantined(net::steady::now());
  // As if it had lost nothing lately: a new quarantine starts at quarantine_ms again.
  n.quarantine_end = {};
  n.quarantined_until_ms = 0;
  n.quarantine_level = 0;
  n.recent_losses.clear();
  spdlog::info("node {} {} by an admin", m.name,
               was ? "released from quarantine" : "(not quarantined) had its losses forgiven");
  dispatch_needed_ = true;
  send(rid, wire::ok{m.request_id});
}

bool broker::healthy_node_serves(const std::string& model, const std::string& except) const {
  const auto now = net::steady::now();
  for (const auto& [name, n] : nodes_) {
    if (name != except && n.online && !n.quarantined(now) && n.serves(model)) return true;
  }
  return false;
}

std::string broker::waiting_reason(const std::string& model) const {
  if (healthy_node_serves(model, "")) return "";
  const node_entry* last = nullptr;  // the offline node that served it, seen last
  bool quarantined = false;
  const auto now = net::steady::now();
  for (const auto& [name, n] : nodes_) {
    if (!n.serves(model)) continue;
    if (n.online && n.quarantined(now)) quarantined = true;
    if (!n.online && (!last || n.last_seen_ms > last->last_seen_ms)) last = &n;
  }
  if (quarantined) {
    return "every online node that serves model '" + model +
           "' is quarantined after losing attempts; waiting";
  }
  if (last) {
    return "no online node serves model '" + model + "' (last seen: node " + last->name + ", " +
           format_ago(last->last_seen_ms, net::wall_ms()) + "); waiting";
  }
  return "no node has offered model '" + model + "' yet; waiting";
}

void broker::node_timers(net::steady::time_point now) {
  for (auto& [name, n] : nodes_) {
    if (n.quarantined_until_ms != 0 && !n.quarantined(now)) {
      n.quarantined_until_ms = 0;
      spdlog::info("node {}'s quarantine is over", name);
      dispatch_needed_ = true;
    }
  }
  for (auto it = hello_peer_buckets_.begin(); it != hello_peer_buckets_.end();) {
    it = it->second.full(now) ? hello_peer_buckets_.erase(it) : std::next(it);
  }
}

}  // namespace hearth::broker
