// hearth models: the models the nodes serve, where they are loaded, which nodes hold them (by
// digest), their queues and the transfers of models onto nodes; with --all also the files of the
// nodes' models directories that they skipped, and why. `hearth models place NAME --to NODE|--all`
// copies a model from the nodes holding it, `hearth models place NAME --split A,B,...` splits it
// over those nodes as a pipeline (each holds a range of its layers), `hearth models evict NAME
// --from NODE` removes it (admin keys; schema/PROTOCOL.md sections 16 and 17).
#include <algorithm>
#include <cstdio>

#include "tools/broker-cli.h"
#include "tools/commands.h"
#include "tools/follow-transfers.h"

namespace hearth::cli {
namespace {

struct models_options {
  broker_options broker;
  bool json = false;
  bool all = false;
  // place / evict
  std::string name, to, from;
  bool place_all = false;
  bool no_wait = false;
  std::vector<std::string> split;
};

// "sha256:9f86d081884c": enough of a digest to tell models apart; "-" while not hashed.
std::string short_digest(const std::string& d) {
  return d.empty() ? "-" : d.substr(0, std::min<size_t>(d.size(), 19));
}

std::string names_text(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return or_dash(s);
}

// Node names, '*' after those with the model loaded.
std::string nodes_text(const wire::model_summary& m) {
  std::string s;
  for (const auto& n : m.nodes) {
    const bool loaded = std::find(m.loaded_on.begin(), m.loaded_on.end(), n) != m.loaded_on.end();
    s += (s.empty() ? "" : ", ") + n + (loaded ? "*" : "");
  }
  return or_dash(s);
}

// A split model's stages: "a 0-11, b 11-22"; "" when it runs whole.
std::string stages_text(const wire::model_summary& m) {
  std::string s;
  for (const auto& st : m.stages) {
    s += (s.empty() ? "" : ", ") + st.node + " " + std::to_string(st.first) + "-" +
         std::to_string(st.end);
  }
  return s;
}

// A parameter count as models are named: "494.0M", "30.5B".
std::string params_count_text(uint64_t n) {
  char buf[32];
  if (n >= 1'000'000'000ull) {
    std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
  } else if (n >= 1'000'000ull) {
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fK", double(n) / 1e3);
  }
  return buf;
}

// "30.5B (3.3B active)" for a mixture of experts, "8.0B" for a dense model, "-" when unknown.
std::string params_text(const wire::model_summary& m) {
  if (m.params_total == 0) return "-";
  std::string s = params_count_text(m.params_total);
  if (m.params_active != 0 && m.params_active != m.params_total)
    s += " (" + params_count_text(m.params_active) + " active)";
  return s;
}

int models(const models_options& o) {
  broker_client client(o.broker);
  const auto reply = client.request<wire::models_reply>(wire::list_models{});
  // The broker caps the list to fit one message (models in use first).
  if (reply.truncated) {
    std::fprintf(stderr, "showing %zu of %u models\n", reply.models.size(), reply.total);
  }
  if (o.json) {
    print_json(o.all ? wire_json(reply) : wire_json(reply.models));
    return 0;
  }
  if (reply.models.empty()) {
    std::fprintf(stderr, "no models\n");
  } else {
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : reply.models) {
      rows.push_back({m.name, or_dash(m.architecture), or_dash(m.quantization),
                      format_bytes(m.size_bytes), params_text(m), std::to_string(m.context_length),
                      short_digest(m.digest), nodes_text(m), names_text(m.holders),
                      std::to_string(m.queued)});
    }
    print_table(
        {"NAME", "ARCH", "QUANT", "SIZE", "PARAMS", "CTX", "DIGEST", "NODES", "HOLDERS", "QUEUED"},
        rows);
  }
  bool split_header = false;
  for (const auto& m : reply.models) {
    if (m.stages.empty()) continue;
    if (!split_header) std::printf("\nsplit models (node and layers of each stage, in order):\n");
    split_header = true;
    std::printf("  %s: %s\n", m.name.c_str(), stages_text(m).c_str());
  }
  if (!reply.transfers.empty()) {
    std::printf("\ntransfers:\n");
    for (const auto& t : reply.transfers) std::printf("  %s\n", transfer_text(t).c_str());
  }
  size_t n_skipped = 0;
  for (const auto& n : reply.skipped) n_skipped += n.files.size();
  if (n_skipped == 0) return 0;
  if (!o.all) {
    std::fprintf(stderr, "%zu model file%s skipped by the nodes (hearth models --all says why)\n",
                 n_skipped, n_skipped == 1 ? "" : "s");
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : reply.skipped)
    for (const auto& f : n.files) rows.push_back({n.node, f.file, f.error});
  std::printf("\nskipped model files:\n");
  print_table({"NODE", "FILE", "WHY"}, rows);
  return 0;
}

int place(const models_options& o) {
  broker_client client(o.broker);
  if (!o.split.empty()) {
    wire::place_model m{0, o.name, "", false};
    m.split = o.split;
    client.request<wire::ok>(m);
    std::string nodes;
    for (const auto& n : o.split) nodes += (nodes.empty() ? "" : ", ") + n;
    std::printf("split %s over %s (hearth models shows the stages)\n", o.name.c_str(),
                nodes.c_str());
    return 0;
  }
  const auto started =
      client.request<wire::transfers_started>(wire::place_model{0, o.name, o.to, o.place_all});
  if (started.transfers.empty()) {
    std::fprintf(stderr, "no node needs it (%s)\n",
                 o.to.empty() ? "every online node that can hold it has it"
                              : (o.to + " holds it already").c_str());
    return 0;
  }
  if (o.no_wait) {
    for (const auto& t : started.transfers) {
      if (o.json) {
        print_json(wire_json(t));
      } else {
        std::printf("transfer %llu: %s\n", static_cast<unsigned long long>(t.transfer_id),
                    transfer_text(t).c_str());
      }
    }
    return 0;
  }
  return follow_transfers(client, started, "placed", o.json);
}

int evict(const models_options& o) {
  broker_client client(o.broker);
  client.request<wire::ok>(wire::evict_model{0, o.name, o.from});
  std::printf("evicted %s from %s\n", o.name.c_str(), o.from.c_str());
  return 0;
}

}  // namespace

action add_models(CLI::App& app) {
  auto o = std::make_shared<models_options>();
  CLI::App* cmd = app.add_subcommand(
      "models",
      "List models: architecture, size, parameters (those a token uses, for a mixture of experts), "
      "the online nodes serving them (* = loaded)");
  cmd->add_flag("--json", o->json,
                "A JSON array of model summaries (every field); with --all the whole reply");
  cmd->add_flag("--all", o->all,
                "Also list the files of online nodes' models folders that they skipped, and why "
                "(truncated downloads, unsupported architectures, dangling links)");
  add_broker_options(cmd, o->broker);

  CLI::App* place_cmd = cmd->add_subcommand(
      "place",
      "Copy a model from the nodes holding it onto a node, or onto every online node "
      "that lacks it and can hold it, over the LAN (admin key needed)");
  place_cmd->add_option("name", o->name, "The model")->required();
  auto* to = place_cmd->add_option("--to", o->to, "The node to copy it onto");
  auto* all =
      place_cmd
          ->add_flag("--all", o->place_all, "Onto every online node that lacks it and can hold it")
          ->excludes(to);
  place_cmd
      ->add_option("--split", o->split,
                   "Split it over these nodes, in this order, as a pipeline: each holds a range of "
                   "its layers from its own copy (NODE,NODE,...)")
      ->delimiter(',')
      ->excludes(to)
      ->excludes(all);
  place_cmd->add_flag("--no-wait", o->no_wait, "Print the transfers started and return");
  place_cmd->add_flag("--json", o->json, "The transfers as JSON");
  add_broker_options(place_cmd, o->broker);
  CLI::App* evict_cmd =
      cmd->add_subcommand("evict", "Remove a model from a node's model store (admin key needed)");
  evict_cmd->add_option("name", o->name, "The model")->required();
  evict_cmd->add_option("--from", o->from, "The node")->required();
  add_broker_options(evict_cmd, o->broker);
  return [o, place_cmd, evict_cmd] {
    if (evict_cmd->parsed()) return evict(*o);
    if (!place_cmd->parsed()) return models(*o);
    if (o->to.empty() && !o->place_all && o->split.empty()) {
      std::fprintf(stderr, "hearth models place: --to NODE, --all or --split NODES is needed\n");
      return 2;
    }
    return place(*o);
  };
}

}  // namespace hearth::cli
