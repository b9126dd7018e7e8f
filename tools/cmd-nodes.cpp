// hearth nodes: the nodes the broker knows, their hardware and models, and why and until when one
// is quarantined; `hearth nodes forget NAME` removes an offline one and `hearth nodes release
// NAME` ends a quarantine (admin keys only).
#include <cstdio>
#include <stdexcept>

#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct nodes_options {
  broker_options broker;
  bool json = false;
  bool all = false;
  std::string hide_after = "7d";  // offline nodes not seen for longer are left out
  std::string forget;             // the node to forget, with the forget subcommand
  std::string release;            // the node to release, with the release subcommand
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

// The models it offers, and those loaded: only an online node has any loaded (an offline one's
// record keeps what was loaded when it was last seen).
std::string models_text(const std::vector<wire::model_info>& models, bool online) {
  std::string loaded;
  for (const auto& m : models) {
    if (m.loaded && online) loaded += (loaded.empty() ? "" : ", ") + m.name;
  }
  return std::to_string(models.size()) + (loaded.empty() ? "" : " (loaded: " + loaded + ")");
}

// "online", "offline", or "quarantined" while the broker gives it no jobs for losing them.
std::string state_text(const wire::node_summary& n, int64_t now_ms) {
  if (n.quarantined_until_ms > now_ms) return "quarantined";
  return n.online ? "online" : "offline";
}

int nodes(const nodes_options& o) {
  const auto hide_after = duration_ms(o.hide_after);
  if (!hide_after) {
    throw std::runtime_error("--hide-after '" + o.hide_after +
                             "' is not a duration: a positive number with d, h, m or s (7d, 12h)");
  }
  broker_client client(o.broker);
  auto reply = client.request<wire::nodes_reply>(wire::list_nodes{});
  // The broker caps the list to fit one message (online nodes first).
  if (reply.truncated) {
    std::fprintf(stderr, "showing %zu of %u nodes\n", reply.nodes.size(), reply.total);
  }
  // Nodes gone for long (a laptop sold, a Pi retired) leave the default listing; --all shows
  // them, and `hearth nodes forget` removes them for good.
  const int64_t now = net::wall_ms();
  size_t hidden = 0;
  if (!o.all) {
    hidden = std::erase_if(reply.nodes, [&](const wire::node_summary& n) {
      return !n.online && now - n.last_seen_ms > int64_t(*hide_after);
    });
  }
  if (hidden > 0) {
    std::fprintf(stderr, "%zu offline node%s not seen for %s left out (--all shows %s)\n", hidden,
                 hidden == 1 ? "" : "s", o.hide_after.c_str(), hidden == 1 ? "it" : "them");
  }
  if (o.json) {
    print_json(wire_json(reply.nodes));
    return 0;
  }
  if (reply.nodes.empty()) {
    std::fprintf(stderr, "no nodes\n");
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : reply.nodes) {
    const auto& hw = n.hardware;
    rows.push_back(
        {n.name, state_text(n, now), n.engine,
         std::to_string(n.running) + "/" + std::to_string(n.slots), std::to_string(n.lost),
         or_dash(hw.cpu_model) + " (" + std::to_string(hw.cpu_threads) + " threads)",
         format_bytes(hw.memory_total) +
             (hw.memory_limit > 0 ? " (limit " + format_bytes(hw.memory_limit) + ")" : ""),
         gpus_text(hw.gpus), models_text(n.models, n.online),
         n.online ? "now" : format_ago(n.last_seen_ms, now)});
  }
  print_table(
      {"NAME", "STATE", "ENGINE", "SLOTS", "LOST", "CPU", "RAM", "GPUS", "MODELS", "LAST SEEN"},
      rows);
  // Why a node gets no jobs, and until when: the attempts it lost last, as the broker saw them.
  for (const auto& n : reply.nodes) {
    if (n.quarantined_until_ms <= now) continue;
    std::printf(
        "\n%s is quarantined until %s (%s more; `hearth nodes release %s` ends it); it "
        "lost:\n",
        n.name.c_str(), format_local_time(n.quarantined_until_ms).c_str(),
        format_duration(n.quarantined_until_ms - now).c_str(), n.name.c_str());
    for (const auto& l : n.losses) {
      std::printf("  %s  job %llu attempt %u: %s\n", format_local_time(l.time_ms).c_str(),
                  static_cast<unsigned long long>(l.job_id), l.attempt, l.reason.c_str());
    }
  }
  return 0;
}

int forget(const nodes_options& o) {
  request_by_name<wire::forget_node>(o.broker, o.forget);
  std::printf("node %s forgotten\n", o.forget.c_str());
  return 0;
}

int release(const nodes_options& o) {
  request_by_name<wire::release_node>(o.broker, o.release);
  std::printf("node %s released: it gets jobs again, its recent losses forgiven\n",
              o.release.c_str());
  return 0;
}

}  // namespace

action add_nodes(CLI::App& app) {
  auto o = std::make_shared<nodes_options>();
  CLI::App* cmd = app.add_subcommand(
      "nodes",
      "List nodes: state (online, offline, quarantined), engine, slots (running/slots), attempts "
      "lost, CPU, RAM, GPUs, models; for a quarantined node until when, and the attempts it lost");
  cmd->add_flag("--json", o->json, "A JSON array of node summaries (every field)");
  cmd->add_flag("--all", o->all, "Also the offline nodes not seen for longer than --hide-after");
  cmd->add_option("--hide-after", o->hide_after,
                  "Leave out offline nodes not seen for this long (30d, 12h, 90m)")
      ->capture_default_str();
  add_broker_options(cmd, o->broker);
  CLI::App* forget_cmd = cmd->add_subcommand(
      "forget", "Remove an offline node and the models only it offered (admin key needed)");
  forget_cmd->add_option("name", o->forget, "the node's name")->required();
  add_broker_options(forget_cmd, o->broker);
  CLI::App* release_cmd = cmd->add_subcommand(
      "release", "End a node's quarantine now and forgive its recent losses (admin key needed)");
  release_cmd->add_option("name", o->release, "the node's name")->required();
  add_broker_options(release_cmd, o->broker);
  return [o, forget_cmd, release_cmd] {
    if (forget_cmd->parsed()) return forget(*o);
    return release_cmd->parsed() ? release(*o) : nodes(*o);
  };
}

}  // namespace hearth::cli
