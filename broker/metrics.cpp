#include "broker/metrics.h"

#include <algorithm>

namespace hearth::broker {
namespace {

struct declaration {
  metric m;
  const char* name;
  const char* help;
  const char* type;
  std::vector<std::string> labels;
  std::vector<double> bounds;
};

// Seconds: a job waits from milliseconds (a free slot) to hours (a busy homelab); a turn and a
// commit take microseconds to a disk's worst fsync.
const std::vector<double> k_job_wait = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 7200};
const std::vector<double> k_first_token = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
const std::vector<double> k_job_duration = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600};
const std::vector<double> k_turn = {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                    0.025,  0.05,   0.1,   0.25,   0.5,   1};

const std::vector<declaration>& declarations() {
  static const std::vector<declaration> d = {
      {metric::jobs_submitted,
       "hearth_jobs_submitted_total",
       "Jobs accepted by the broker.",
       "counter",
       {"model"},
       {}},
      {metric::jobs_finished,
       "hearth_jobs_finished_total",
       "Jobs that ended, by their final state (completed, failed, cancelled).",
       "counter",
       {"model", "state"},
       {}},
      {metric::requeues,
       "hearth_job_requeues_total",
       "Attempts that ended without finishing their job, which was queued again, by cause "
       "(node: lost or stopped responding; handback: the node gave it back; broker_restart).",
       "counter",
       {"cause"},
       {}},
      {metric::tokens_generated,
       "hearth_tokens_generated_total",
       "Tokens generated (as streamed to the broker), by model and node.",
       "counter",
       {"model", "node"},
       {}},
      {metric::heartbeats_missed,
       "hearth_node_heartbeats_missed_total",
       "Heartbeat intervals in which nothing was heard from a node.",
       "counter",
       {"node"},
       {}},
      {metric::auth_failures,
       "hearth_auth_failures_total",
       "Refused peers and requests: unknown CURVE keys, connections over the per-address cap, "
       "commands a key's role may not send, unknown or revoked API keys.",
       "counter",
       {"reason"},
       {}},
      {metric::transfer_bytes,
       "hearth_model_transfer_bytes_total",
       "Model bytes brought onto nodes, by where they came from: internet (a pull from Hugging "
       "Face, Ollama's registry or a URL) or peer (copied from another node on the LAN).",
       "counter",
       {"from"},
       {}},
      {metric::transfers_finished,
       "hearth_model_transfers_finished_total",
       "Model transfers onto nodes that ended, by their final state (done, failed).",
       "counter",
       {"state"},
       {}},
      {metric::job_queue_wait,
       "hearth_job_queue_wait_seconds",
       "Time from a job's (re)queueing to its assignment to a node.",
       "histogram",
       {"model"},
       k_job_wait},
      {metric::job_first_token,
       "hearth_job_time_to_first_token_seconds",
       "Time from a job's submission to its first generated token.",
       "histogram",
       {"model"},
       k_first_token},
      {metric::job_duration,
       "hearth_job_duration_seconds",
       "Time from a job's submission to its end, by final state.",
       "histogram",
       {"model", "state"},
       k_job_duration},
      {metric::turn_duration,
       "hearth_broker_turn_duration_seconds",
       "One turn of the broker's loop: a burst of messages, timers, dispatch and the commit.",
       "histogram",
       {},
       k_turn},
      {metric::store_commit,
       "hearth_store_commit_duration_seconds",
       "The job store's commit of one turn (fsync included).",
       "histogram",
       {},
       k_turn},
  };
  return d;
}

}  // namespace

broker_metrics::broker_metrics() {
  for (const auto& d : declarations()) {
    auto& f = families_[size_t(d.m)];
    f.desc.name = d.name;
    f.desc.help = d.help;
    f.desc.type = d.type;
    f.desc.label_names = d.labels;
    f.desc.bounds = d.bounds;
  }
}

broker_metrics::series& broker_metrics::at(metric m, const std::vector<std::string>& labels) {
  auto& f = families_[size_t(m)];
  auto it = f.values.find(labels);
  if (it != f.values.end()) return it->second;
  if (f.values.size() >= k_max_series) {
    const std::vector<std::string> other(labels.size(), "_other");
    it = f.values.try_emplace(other).first;
  } else {
    it = f.values.try_emplace(labels).first;
  }
  it->second.buckets.resize(f.desc.bounds.size());
  return it->second;
}

void broker_metrics::add(metric m, const std::vector<std::string>& labels, double v) {
  at(m, labels).value += v;
}

void broker_metrics::observe(metric m, const std::vector<std::string>& labels, double seconds) {
  auto& s = at(m, labels);
  const auto& bounds = families_[size_t(m)].desc.bounds;
  const auto b = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  if (size_t(b) < s.buckets.size()) ++s.buckets[b];
  s.sum += seconds;
  ++s.count;
}

double broker_metrics::value(metric m, const std::vector<std::string>& labels) const {
  const auto& f = families_[size_t(m)];
  auto it = f.values.find(labels);
  return it == f.values.end() ? 0 : it->second.value;
}

void broker_metrics::append_to(std::vector<wire::metric_family>& out) const {
  for (const auto& f : families_) {
    wire::metric_family w = f.desc;
    for (const auto& [labels, s] : f.values) {
      wire::metric_sample sample;
      sample.labels = labels;
      sample.value = s.value;
      if (!w.bounds.empty()) {
        uint64_t cumulative = 0;
        for (uint64_t b : s.buckets) sample.buckets.push_back(cumulative += b);
        sample.sum = s.sum;
        sample.count = s.count;
      }
      w.samples.push_back(std::move(sample));
    }
    out.push_back(std::move(w));
  }
}

void metrics_turn::commit(broker_metrics& to) {
  for (const auto& o : ops_) {
    if (o.observe) {
      to.observe(o.m, o.labels, o.v);
    } else {
      to.add(o.m, o.labels, o.v);
    }
  }
  ops_.clear();
}

}  // namespace hearth::broker
