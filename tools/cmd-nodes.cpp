// hearth nodes: the nodes the broker knows, their hardware and models; `hearth nodes forget NAME`
// removes an offline one (admin keys only).
#include <cstdio>

#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct nodes_options {
  broker_options broker;
  bool json = false;
  std::string forget;  // the node to forget, with the forget subcommand
};

std::string gpus_text(const std::vector<wire::gpu_info>& gpus) {
  std::string s;
  for (const auto& g : gpus) {
    // "NVIDIA GeForce RTX 3090 (cuda, discrete, 24.0 GiB, 21.5 GiB free)"
    const bool free_known = g.memory_free > 0 && g.memory_free != g.memory_total;
    s += (s.empty() ? "" : ", ") + g.name + " (" + g.backend +
         (g.type.empty() ? "" : ", " + g.type) + ", " + format_bytes(g.memory_total) +
         (free_known ? ", " + format_bytes(g.memory_free) + " free" : "") + ")";
  }
  return or_dash(s);
}

std::string models_text(const std::vector<wire::model_info>& models) {
  std::string loaded;
  for (const auto& m : models) {
    if (m.loaded) loaded += (loaded.empty() ? "" : ", ") + m.name;
  }
  return std::to_string(models.size()) + (loaded.empty() ? "" : " (loaded: " + loaded + ")");
}

// "online", "offline", or "quarantined" while the broker gives it no jobs for losing them.
std::string state_text(const wire::node_summary& n, int64_t now_ms) {
  if (n.quarantined_until_ms > now_ms) return "quarantined";
  return n.online ? "online" : "offline";
}

int nodes(const nodes_options& o) {
  broker_client client(o.broker);
  const auto reply = client.request<wire::nodes_reply>(wire::list_nodes{});
  // The broker caps the list to fit one message (online nodes first).
  if (reply.truncated) {
    std::fprintf(stderr, "showing %zu of %u nodes\n", reply.nodes.size(), reply.total);
  }
  if (o.json) {
    print_json(wire_json(reply.nodes));
    return 0;
  }
  if (reply.nodes.empty()) {
    std::fprintf(stderr, "no nodes\n");
    return 0;
  }
  const int64_t now = net::wall_ms();
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : reply.nodes) {
    const auto& hw = n.hardware;
    rows.push_back({n.name, state_text(n, now), n.engine,
                    std::to_string(n.running) + "/" + std::to_string(n.slots),
                    std::to_string(n.lost),
                    or_dash(hw.cpu_model) + " (" + std::to_string(hw.cpu_threads) + " threads)",
                    format_bytes(hw.memory_total), gpus_text(hw.gpus), models_text(n.models),
                    n.online ? "now" : format_ago(n.last_seen_ms, now)});
  }
  print_table(
      {"NAME", "STATE", "ENGINE", "SLOTS", "LOST", "CPU", "RAM", "GPUS", "MODELS", "LAST SEEN"},
      rows);
  return 0;
}

int forget(const nodes_options& o) {
  broker_client client(o.broker);
  wire::forget_node req;
  req.name = o.forget;
  client.request<wire::ok>(req);
  std::printf("node %s forgotten\n", o.forget.c_str());
  return 0;
}

}  // namespace

action add_nodes(CLI::App& app) {
  auto o = std::make_shared<nodes_options>();
  CLI::App* cmd = app.add_subcommand(
      "nodes",
      "List nodes: state (online, offline, quarantined), engine, slots (running/slots), attempts "
      "lost, CPU, RAM, GPUs, models");
  cmd->add_flag("--json", o->json, "A JSON array of node summaries (every field)");
  add_broker_options(cmd, o->broker);
  CLI::App* forget_cmd = cmd->add_subcommand(
      "forget", "Remove an offline node and the models only it offered (admin key needed)");
  forget_cmd->add_option("name", o->forget, "the node's name")->required();
  add_broker_options(forget_cmd, o->broker);
  return [o, forget_cmd] { return forget_cmd->parsed() ? forget(*o) : nodes(*o); };
}

}  // namespace hearth::cli
