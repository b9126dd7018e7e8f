// get_metrics (metrics-report.h).
#include "broker/metrics-report.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "schema/codec.h"

namespace hearth::broker {
namespace {

// A family's series at most (a node's models, say), and the reply's size at most: it must fit
// one message, with room to spare.
constexpr size_t k_max_samples = 4096;
constexpr size_t k_max_reply_bytes = size_t(wire::max_message_bytes) * 3 / 4;
// hearth_broker_peers counts the peers heard from within this long, and at most so many (each
// needs a connection, but the count is bounded here too).
constexpr auto k_recent_peer = std::chrono::seconds(60);
constexpr size_t k_max_recent_peers = 100000;

wire::metric_family gauge(std::string name, std::string help,
                          std::vector<std::string> label_names) {
  wire::metric_family f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = "gauge";
  f.label_names = std::move(label_names);
  return f;
}

void put(wire::metric_family& f, std::vector<std::string> labels, double v) {
  if (f.samples.size() >= k_max_samples) return;
  wire::metric_sample s;
  s.labels = std::move(labels);
  s.value = v;
  f.samples.push_back(std::move(s));
}

}  // namespace

void metrics_report::note_peer(const std::string& rid) {
  if (recent_peers_.size() < k_max_recent_peers || recent_peers_.contains(rid)) {
    recent_peers_[rid] = net::steady::now();
  }
}

void metrics_report::prune_peers(net::steady::time_point now) {
  std::erase_if(recent_peers_, [&](const auto& kv) { return now - kv.second > k_recent_peer; });
}

void metrics_report::append_state_metrics(std::vector<wire::metric_family>& out,
                                          const metrics_sources& from) const {
  const auto now = net::steady::now();
  const int64_t wall = net::wall_ms();

  // Queues, by model and priority: depth, and the age of the oldest job (the lowest id).
  auto depth = gauge("hearth_queue_depth", "Jobs waiting in the queue.", {"model", "priority"});
  auto oldest = gauge("hearth_queue_oldest_age_seconds", "Age of the oldest job waiting.",
                      {"model", "priority"});
  // Every model a node ever advertised has a series, 0 when nothing waits, so that graphs and
  // alerts see an empty queue rather than no data.
  for (const auto& model : from.nodes.known_models()) {
    if (!from.queues.contains(model)) {
      put(depth, {model, "0"}, 0);
      put(oldest, {model, "0"}, 0);
    }
  }
  for (const auto& [model, q] : from.queues) {
    std::map<int64_t, std::pair<uint64_t, int64_t>> by_priority;  // -> (count, oldest created)
    for (const auto& [neg_priority, id] : q) {
      auto& [count, created] = by_priority[-neg_priority];
      if (count++ == 0) created = from.jobs.at(id).row.created_ms;
    }
    for (const auto& [priority, v] : by_priority) {
      put(depth, {model, std::to_string(priority)}, double(v.first));
      put(oldest, {model, std::to_string(priority)},
          double(std::max<int64_t>(wall - v.second, 0)) / 1000);
    }
  }
  auto running = gauge("hearth_jobs_running", "Jobs running on a node now.", {"model"});
  std::map<std::string, uint64_t> running_by_model;
  for (const auto& model : from.nodes.known_models()) running_by_model[model] = 0;
  for (const auto& [id, j] : from.jobs) {
    if (j.row.state == wire::job_state::running) ++running_by_model[j.row.model];
  }
  for (const auto& [model, n] : running_by_model) put(running, {model}, double(n));

  // Nodes.
  auto nodes = gauge("hearth_nodes", "Nodes the broker knows, online or offline.", {"state"});
  auto up = gauge("hearth_node_up", "Whether the node is online (1) or offline (0).", {"node"});
  auto quarantined = gauge("hearth_node_quarantined",
                           "Whether the node is quarantined (gets no jobs for a while after "
                           "losing attempts).",
                           {"node"});
  auto slots = gauge("hearth_node_slots", "Jobs the node runs at once.", {"node"});
  auto busy = gauge("hearth_node_busy_slots", "Slots running an attempt now.", {"node"});
  auto rate = gauge("hearth_node_tokens_per_second",
                    "Tokens the node generated per second over the last 10 s.", {"node"});
  auto loaded = gauge("hearth_node_model_loaded",
                      "Models the node serves: 1 when loaded in memory, 0 when on disk only.",
                      {"node", "model"});
  auto lost = wire::metric_family{"hearth_node_lost_attempts_total",
                                  "Attempts the node lost since the broker started.",
                                  "counter",
                                  {"node"},
                                  {},
                                  {}};
  auto mem_total = gauge("hearth_node_memory_total_bytes", "The node's RAM.", {"node"});
  auto mem_avail = gauge("hearth_node_memory_available_bytes",
                         "The node's available RAM (as it last said).", {"node"});
  const std::vector<std::string> device_labels = {"node", "device", "backend", "name"};
  auto dev_total = gauge("hearth_device_memory_total_bytes", "A GPU's memory.", device_labels);
  auto dev_free = gauge("hearth_device_memory_free_bytes",
                        "A GPU's free memory (as its node last said).", device_labels);
  auto dev_busy =
      gauge("hearth_device_utilization_ratio",
            "Share of time a GPU was busy, 0 to 1, where its driver says (NVML).", device_labels);
  uint64_t online = 0;
  for (const auto& [name, n] : from.nodes.nodes()) {
    online += n.online;
    put(up, {name}, n.online);
    put(quarantined, {name}, n.quarantined(now));
    put(slots, {name}, n.slots);
    put(busy, {name}, double(std::min<size_t>(n.running.size(), n.slots)));
    put(rate, {name}, n.tokens_per_second(now));
    put(lost, {name}, n.lost);
    put(mem_total, {name}, double(n.hardware.memory_total));
    put(mem_avail, {name}, double(n.hardware.memory_available));
    for (const auto& m : n.models) put(loaded, {name, m.name}, m.loaded);
    for (size_t i = 0; i < n.hardware.gpus.size(); ++i) {
      const auto& g = n.hardware.gpus[i];
      std::vector<std::string> labels = {name, std::to_string(i), g.backend, g.name};
      put(dev_total, labels, double(g.memory_total));
      put(dev_free, labels, double(g.memory_free));
      if (g.utilization >= 0) put(dev_busy, labels, std::min(g.utilization, 1.0));
    }
  }
  put(nodes, {"online"}, double(online));
  put(nodes, {"offline"}, double(from.nodes.nodes().size() - online));

  // The broker itself.
  auto peers =
      gauge("hearth_broker_peers",
            "Peers (nodes, clients, gateways) that sent a message in the last minute.", {});
  put(peers, {}, double(recent_peers_.size()));
  auto queued_bytes = gauge("hearth_broker_unfinished_job_bytes",
                            "Prompt and message bytes of unfinished jobs held in memory.", {});
  put(queued_bytes, {}, double(from.unfinished_job_bytes));
  const store_stats& stored = from.store;
  auto wal = gauge("hearth_store_wal_bytes", "Size of the job store's write-ahead log.", {});
  put(wal, {}, double(stored.wal_bytes));
  auto db = gauge("hearth_store_database_bytes", "Size of the job store's database file.", {});
  put(db, {}, double(stored.db_bytes));
  wire::metric_family checkpoints{"hearth_store_checkpoints_total",
                                  "WAL checkpoints, by outcome (a failed one is retried).",
                                  "counter",
                                  {"outcome"},
                                  {},
                                  {}};
  put(checkpoints, {"done"}, double(stored.checkpoints));
  put(checkpoints, {"failed"}, double(stored.checkpoint_failures));
  auto start = gauge("hearth_broker_start_time_seconds",
                     "When the broker started (Unix time): its counters count from then.", {});
  put(start, {}, double(started_ms_) / 1000);

  for (auto* f : {&depth,     &oldest,    &running,     &nodes,    &up,    &quarantined,
                  &slots,     &busy,      &rate,        &loaded,   &lost,  &mem_total,
                  &mem_avail, &dev_total, &dev_free,    &dev_busy, &peers, &queued_bytes,
                  &wal,       &db,        &checkpoints, &start}) {
    out.push_back(std::move(*f));
  }
  for (const auto& [counts, name, help] :
       {std::tuple(&messages_received_, "hearth_broker_messages_received_total",
                   "Messages the broker received, by command (invalid: no envelope)."),
        std::tuple(&messages_sent_, "hearth_broker_messages_sent_total",
                   "Messages the broker sent (or queued for a slow peer), by command.")}) {
    wire::metric_family f{name, help, "counter", {"command"}, {}, {}};
    for (size_t code = 0; code < counts->size(); ++code) {
      if ((*counts)[code] == 0) continue;
      const auto cmd = wire::command_from_byte(uint8_t(code));
      put(f, {cmd ? std::string(wire::command_name(*cmd)) : "unknown"}, double((*counts)[code]));
    }
    if (counts == &messages_received_ && messages_invalid_ > 0) {
      put(f, {"invalid"}, double(messages_invalid_));
    }
    out.push_back(std::move(f));
  }
  if (from.connections) {
    auto connections = gauge("hearth_broker_connections",
                             "Connections open to the broker (handshakes included).", {});
    put(connections, {}, double(*from.connections));
    out.push_back(std::move(connections));
  }
  auto transfers = gauge("hearth_model_transfers",
                         "Model transfers onto nodes not finished yet, by state (starting: sent, "
                         "no report yet; running).",
                         {"state"});
  for (const auto& [state, n] : from.transfers) put(transfers, {state}, double(n));
  out.push_back(std::move(transfers));
}

void metrics_report::reply(turn_output& out, const std::string& rid, const wire::get_metrics& m,
                           const metrics_sources& from) const {
  wire::metrics_reply r;
  r.request_id = m.request_id;
  append_state_metrics(r.families, from);
  counters_.append_to(r.families);
  for (auto& f : r.families) {
    if (f.samples.size() > k_max_samples) {
      f.samples.resize(k_max_samples);
      r.truncated = true;
    }
  }
  // Too large for a message (thousands of nodes and models): the largest families lose series
  // until it fits.
  std::string body = wire::encode(r);
  while (body.size() > k_max_reply_bytes) {
    auto largest = std::max_element(r.families.begin(), r.families.end(), [](auto& a, auto& b) {
      return a.samples.size() < b.samples.size();
    });
    largest->samples.resize(largest->samples.size() / 2);
    r.truncated = true;
    body = wire::encode(r);
  }
  out.queue_out(rid, wire::command::metrics_reply, std::move(body));
}

}  // namespace hearth::broker
