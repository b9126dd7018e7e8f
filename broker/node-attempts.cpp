// The attempts nodes run (node-attempts.h).
#include "broker/node-attempts.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "schema/job-params.h"

namespace hearth::broker {

namespace {
// A job_resume whose stream still has a gap is sent again after this long; after this many
// without the stream advancing, the attempt is abandoned.
constexpr auto k_resume_retry = std::chrono::seconds(2);
constexpr uint32_t k_max_resumes = 5;
// Stop reasons of a job_final failed that say the request is at fault (it fails on any node):
// anything else failed is the node's doing (a model that does not load there, an engine error).
bool final_blames_request(const std::string& stop_reason) {
  return stop_reason == wire::stop_reason_prompt_too_long ||
         stop_reason == wire::stop_reason_invalid_request;
}
}  // namespace

void node_attempts::on_hello(const std::string& rid, const peer& who, wire::node_hello m) {
  node_entry* registered = nodes_.hello(rid, who, m);
  if (!registered) return;
  node_entry& n = *registered;
  // Reconcile: attempts the node still runs (or holds, finished) and the broker still gives it
  // continue from the broker's count of their tokens, since chunks and finals sent while the
  // connection was down (or the broker restarting) are lost; the node drops the others; the
  // broker requeues what it gave the node and the node no longer has.
  std::set<uint64_t> listed;
  std::vector<wire::job_resume> resumes;
  for (const auto& ref : m.running) {
    live_job* j = jobs_.find(ref.job_id);
    const bool ours = j && j->row.state == wire::job_state::running && j->row.node == n.name &&
                      j->row.attempts == ref.attempt;
    if (ours) {
      live_job& lj = *j;
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
      out_.send(rid, wire::job_cancel{ref.job_id, ref.attempt});
    }
  }
  for (uint64_t id : std::set<uint64_t>(n.running)) {
    if (listed.contains(id)) continue;
    n.running.erase(id);
    if (live_job* j = jobs_.find(id)) {
      jobs_.attempt_lost(n, *j, "node " + n.name + " reconnected without the job");
    }
  }
  nodes_.welcome(n, resumes);
  jobs_.dispatch_later();
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

void node_attempts::on_started(node_entry& n, const wire::job_started& m) {
  live_job* j = current_attempt(jobs_.jobs(), n, m.job_id, m.attempt);
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
  store_.job_started(m.job_id, m.attempt, n.name, m.n_prompt, j->row.started_ms, detail);
}

void node_attempts::on_tokens(node_entry& n, const wire::job_tokens& m, std::string_view body) {
  live_job* j = current_attempt(jobs_.jobs(), n, m.job_id, m.attempt);
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
  } else if (const uint64_t most = wire::job_params_max_stream_tokens(j->row.params);
             m.seq + m.n_tokens > most) {
    // No attempt generates more than max_tokens per choice: a count beyond is not the job's
    // output.
    wrong =
        "node " + n.name + " sent tokens " + std::to_string(m.seq) + ".." +
        std::to_string(m.seq + m.n_tokens - 1) + " of a job of at most " + std::to_string(most) +
        " tokens (max_tokens" +
        (j->row.params.api.n > 1 ? " × " + std::to_string(j->row.params.api.n) + " choices)" : ")");
  }
  if (!wrong.empty()) {
    out_.send(n.routing_id, wire::job_cancel{m.job_id, m.attempt});
    n.running.erase(m.job_id);
    nodes_.lost_attempt(n, j->row.id, j->row.attempts, wrong);
    jobs_.requeue(*j, wrong);
    return;
  }
  if (j->output.size() + m.text.size() > cfg_.max_output_bytes) {
    out_.send(n.routing_id, wire::job_cancel{m.job_id, m.attempt});
    n.running.erase(m.job_id);
    spdlog::warn("job {}: its output would pass max_output_bytes ({} bytes); it is stopped",
                 m.job_id, cfg_.max_output_bytes);
    jobs_.finish(*j, wire::job_state::failed, "output_too_large",
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
    relay_.notify(*j, wire::command::job_tokens, std::string(body));
  } else if (j->output.size() > j->relayed.byte) {
    // Re-sent after a reload: the watchers have this chunk's beginning already, so they get the
    // rest as a chunk at the seq they expect (PROTOCOL.md section 11).
    relay_.notify(*j, wire::command::job_tokens,
                  wire::encode(wire::job_tokens{m.job_id, m.attempt, j->relayed.seq,
                                                uint32_t(j->next_seq - j->relayed.seq),
                                                j->output.substr(j->relayed.byte)}));
  }
  if (j->next_seq > j->relayed.seq) {
    relayed_before_turn_.try_emplace(m.job_id, j->relayed);
    j->relayed = {j->next_seq, j->output.size()};
  }
}

void node_attempts::on_final(node_entry& n, const wire::job_final& m) {
  live_job* j = current_attempt(jobs_.jobs(), n, m.job_id, m.attempt);
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
    jobs_.attempt_lost(n, *j, why);
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
    nodes_.lost_attempt(n, j->row.id, j->row.attempts, why);
    jobs_.requeue(*j, why);
    return;
  }
  if (state == wire::job_state::completed) {
    n.measure(uint32_t(j->next_seq),
              std::chrono::duration<double>(net::steady::now() - j->assigned_at).count());
  }
  j->row.n_prompt = m.n_prompt;
  jobs_.finish(*j, state, m.stop_reason, m.error, m.n_prompt, uint32_t(j->next_seq));
}

void node_attempts::on_handback(node_entry& n, const wire::job_handback& m) {
  live_job* j = current_attempt(jobs_.jobs(), n, m.job_id, m.attempt);
  if (!j) return;
  n.running.erase(m.job_id);
  handed_back(n, *j, m.reason);
}

void node_attempts::handed_back(node_entry& n, live_job& j, const std::string& reason) {
  // A hand-back is not the job's fault: it does not count against max_attempts. It does count
  // against the node, or a node could take jobs and hand them back for ever.
  const std::string why = "node " + n.name + " handed it back: " + loss_reason(reason);
  nodes_.lost_attempt(n, j.row.id, j.row.attempts, why, /*handback=*/true);
  jobs_.requeue(j, why, job_table::loss::handback);
}

void node_attempts::resume_stream(node_entry& n, live_job& j, const std::string& why) {
  if (j.resume.unanswered >= k_max_resumes) {
    abandon_stream(
        n, j, why + " (" + std::to_string(k_max_resumes) + " job_resume did not bring them back)");
    return;
  }
  spdlog::info("job {} attempt {}: {}; asking node {} to send the stream again from token {}",
               j.row.id, j.row.attempts, why, n.name, j.next_seq);
  out_.send(n.routing_id, wire::job_resume{j.row.id, j.row.attempts, j.next_seq});
  j.resume.outstanding = true;
  j.resume.gap = true;
  j.resume.sent = net::steady::now();
  ++j.resume.unanswered;
}

void node_attempts::timers(net::steady::time_point now) {
  for (auto& [id, j] : jobs_.jobs()) {
    if (j.recovered_deadline && now > *j.recovered_deadline) {
      j.recovered_deadline.reset();
      if (node_entry* n = nodes_.find(j.row.node)) n->running.erase(id);
      jobs_.requeue(j, "node " + j.row.node + " did not report the job after the broker restarted",
                    job_table::loss::broker_restart);
    } else if (j.resume.outstanding) {
      resume_timer(j, now);
    }
  }
}

void node_attempts::resume_timer(live_job& j, net::steady::time_point now) {
  // A resume of an attempt that has ended since (the job was queued again) is over.
  if (j.row.state != wire::job_state::running) {
    j.resume = {};
    return;
  }
  if (!j.resume.gap || now - j.resume.sent < k_resume_retry) return;
  node_entry* n = nodes_.find(j.row.node);
  if (!n || !n->online) return;  // node_lost requeues it
  j.resume.outstanding = false;
  resume_stream(*n, j,
                "job_resume unanswered for " + std::to_string(k_resume_retry.count()) + " s");
}

void node_attempts::abandon_stream(node_entry& n, live_job& j, const std::string& why) {
  out_.send(n.routing_id, wire::job_cancel{j.row.id, j.row.attempts});
  n.running.erase(j.row.id);
  jobs_.attempt_lost(n, j, why);
}

void node_attempts::node_lost(node_entry& n, const std::string& why) {
  // The attempts it held are lost with it: each counts against it and is queued again.
  for (uint64_t id : nodes_.offline(n)) {
    if (live_job* j = jobs_.find(id)) {
      nodes_.lost_attempt(n, j->row.id, j->row.attempts, why);
      jobs_.requeue(*j, why);
    }
  }
  // A pipeline with a stage on it moves that stage (pipelines.h repair, before the dispatch).
  jobs_.dispatch_later();
}

}  // namespace hearth::broker
