// The broker's counters and histograms, as Prometheus counts them (get_metrics, served by
// hearth-gateway as /metrics). Gauges (queue depth, nodes, memory) are read from the broker's
// state when asked and are not kept here.
//
// Each family is declared once, with its name, help, labels and (histograms) bucket bounds, in
// metrics.cpp; the broker adds to a family by its id. A family holds at most k_max_series label
// sets: past that, new ones are counted under the label values "_other", so no peer can grow the
// broker's memory by inventing model or node names.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "schema/messages.h"

namespace hearth::broker {

// Every family the broker keeps, in the order they are reported.
enum class metric : uint8_t {
  jobs_submitted,      // counter {model}
  jobs_finished,       // counter {model, state}
  requeues,            // counter {cause}
  tokens_generated,    // counter {model, node}
  heartbeats_missed,   // counter {node}
  auth_failures,       // counter {reason}
  transfer_bytes,      // counter {from}: model bytes onto nodes, from the internet or a peer
  transfers_finished,  // counter {state}
  job_queue_wait,      // histogram {model}
  job_first_token,     // histogram {model}
  job_duration,        // histogram {model, state}
  turn_duration,       // histogram {}
  store_commit,        // histogram {}
  count_
};

class broker_metrics {
 public:
  static constexpr size_t k_max_series = 1000;

  broker_metrics();
  // Adds `v` to a counter series, or observes `v` (seconds) in a histogram series.
  void add(metric m, const std::vector<std::string>& labels, double v = 1);
  void observe(metric m, const std::vector<std::string>& labels, double seconds);
  // A counter's value (0 when the series does not exist): for tests and the per-node rate.
  double value(metric m, const std::vector<std::string>& labels) const;
  // Every family as the wire carries it.
  void append_to(std::vector<wire::metric_family>& out) const;

 private:
  struct series {
    double value = 0;
    std::vector<uint64_t> buckets;  // per bound, not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  struct family {
    wire::metric_family desc;  // name, help, type, label names, bounds; no samples
    std::map<std::vector<std::string>, series> values;
  };
  series& at(metric m, const std::vector<std::string>& labels);
  std::array<family, size_t(metric::count_)> families_;
};

// What a turn counts about jobs, kept until the turn's transaction commits: a turn whose commit
// fails is undone (broker::storage_failed) and must not have counted a job that was never stored,
// so that the counters always agree with the job history.
class metrics_turn {
 public:
  void add(metric m, std::vector<std::string> labels, double v = 1) {
    ops_.push_back({m, std::move(labels), v, false});
  }
  void observe(metric m, std::vector<std::string> labels, double seconds) {
    ops_.push_back({m, std::move(labels), seconds, true});
  }
  void commit(broker_metrics& to);
  void discard() { ops_.clear(); }

 private:
  struct op {
    metric m;
    std::vector<std::string> labels;
    double v;
    bool observe;
  };
  std::vector<op> ops_;
};

}  // namespace hearth::broker
