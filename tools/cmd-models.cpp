// hearth models: the models the nodes serve, where they are loaded, and their queues; with --all
// also the files of the nodes' models directories that they skipped, and why.
#include <algorithm>
#include <cstdio>

#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct models_options {
  broker_options broker;
  bool json = false;
  bool all = false;
};

// Node names, '*' after those with the model loaded.
std::string nodes_text(const wire::model_summary& m) {
  std::string s;
  for (const auto& n : m.nodes) {
    const bool loaded = std::find(m.loaded_on.begin(), m.loaded_on.end(), n) != m.loaded_on.end();
    s += (s.empty() ? "" : ", ") + n + (loaded ? "*" : "");
  }
  return or_dash(s);
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
                      nodes_text(m), std::to_string(m.queued)});
    }
    print_table({"NAME", "ARCH", "QUANT", "SIZE", "PARAMS", "CTX", "NODES", "QUEUED"}, rows);
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
  return [o] { return models(*o); };
}

}  // namespace hearth::cli
