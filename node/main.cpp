// hearth-node: flags for the essentials, YAML for the rest (node/config.h), then serve the broker
// until SIGINT or SIGTERM, finishing or handing back running jobs before exiting.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <tuple>

#include "common/daemon.h"
#include "node/node.h"
#include "schema/endpoint.h"
#include "schema/version.h"

int main(int argc, char** argv) {
  using namespace hearth::node;
  CLI::App app{"hearth-node: runs jobs from a hearth broker on this machine"};
  app.set_version_flag("--version", hearth::wire::version_line("hearth-node"));
  node_config cfg;
  std::string config_path, broker, models, name, engine, backend, log_level, broker_key, key;
  std::string store, store_limit, memory_limit;
  uint32_t slots = 0;
  int32_t device = -1;
  double rate = -1;
  int64_t rescan_ms = -1;
  app.add_option("--config", config_path, "YAML file with further settings");
  app.add_option("--broker", broker, "broker endpoint (default tcp://127.0.0.1:5555)");
  app.add_option("--models", models,
                 "directory of GGUF models and Hugging Face folders to serve besides the store's "
                 "(default: none, the store's models only)");
  app.add_option("--models-rescan-ms", rescan_ms,
                 "how often the models directory is scanned for added, changed and removed "
                 "models (default " +
                     std::to_string(node_config{}.models_rescan_ms) + "; 0: only at start)")
      ->check(CLI::Range(int64_t(0), int64_t(86'400'000)));
  app.add_option("--store", store,
                 "the model store's folder (default $HEARTH_STORE, else "
                 "~/.local/share/hearth/store)");
  app.add_option("--memory-limit", memory_limit,
                 "most bytes this node offers for models and their contexts, e.g. 8GiB (default: "
                 "the memory available); the broker splits a larger model across nodes within it");
  app.add_option("--store-limit", store_limit,
                 "most bytes the model store holds, e.g. 200GiB (0: the disk); least recently used "
                 "models are evicted to stay below it");
  app.add_option("--name", name, "node name (default: the hostname)");
  app.add_option("--slots", slots,
                 "jobs run at once (default " + std::to_string(node_config{}.slots) + ")");
  app.add_option("--engine", engine, "cpu (default) or null (fake tokens, for tests)");
  app.add_option("--null-tokens-per-s", rate, "null engine: tokens per second per job");
  app.add_option("--backend", backend,
                 "cpu, cuda, vulkan or auto (default: a CUDA GPU, else a Vulkan GPU, else the "
                 "CPU)");
  auto* device_opt = app.add_option("--device", device,
                                    "device index of that backend (hearth devices); -1: the best");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
  app.add_option("--broker-key", broker_key,
                 "the broker's public certificate, for a broker run with --auth (with --key)");
  app.add_option("--key", key, "this node's secret certificate from `hearth keygen`");
  CLI11_PARSE(app, argc, argv);

  if (!config_path.empty()) {
    if (auto r = node_config_load(config_path, cfg); !r) {
      std::fprintf(stderr, "hearth-node: error: %s\n", r.message().c_str());
      return 2;
    }
  }
  // Flags win over the file.
  if (!broker.empty()) cfg.broker = broker;
  if (!models.empty()) cfg.models_dir = models;
  if (!name.empty()) cfg.name = name;
  if (!store.empty()) cfg.store = store;
  // Sizes: "8GiB", "512 MiB", bytes.
  for (const auto& [flag, text, out] :
       {std::tuple{"--memory-limit", &memory_limit, &cfg.memory_limit},
        std::tuple{"--store-limit", &store_limit, &cfg.store_limit}}) {
    if (text->empty()) continue;
    auto bytes = node_size_parse(*text);
    if (!bytes) {
      std::fprintf(stderr, "hearth-node: error: %s: %s\n", flag, bytes.message().c_str());
      return 2;
    }
    *out = *bytes;
  }
  if (slots != 0) cfg.slots = slots;
  if (!engine.empty()) cfg.engine = engine;
  if (rate >= 0) cfg.null_tokens_per_s = rate;
  if (rescan_ms >= 0) cfg.models_rescan_ms = uint32_t(rescan_ms);
  if (!backend.empty()) {
    auto kind = node_backend_parse(backend);
    if (!kind) {
      std::fprintf(stderr, "hearth-node: error: %s\n", kind.message().c_str());
      return 2;
    }
    cfg.backend = *kind;
  }
  if (device_opt->count() > 0) cfg.device = device;
  if (!log_level.empty()) cfg.log_level = log_level;
  if (!broker_key.empty()) cfg.broker_key = broker_key;
  if (!key.empty()) cfg.key = key;
  if (auto r = node_config_check(cfg); !r) {
    std::fprintf(stderr, "hearth-node: error: %s\n", r.message().c_str());
    return 2;
  }
  hearth::daemon_log_to_stderr(cfg.log_level, "node: ");
  // Not fatal: at boot the name service may come up after the node, which keeps trying.
  if (auto r = hearth::net::endpoint_host_check(cfg.broker); !r) {
    spdlog::error("{}; the node keeps trying to reach it", r.message());
  }
  hearth::daemon_stop_on_signals();
  try {
    node_daemon node(cfg);
    const int rc = node.run(hearth::daemon_stop);
    // The log may go elsewhere; why the node gave up is also the command's own error.
    if (rc != 0 && !node.refusal().empty()) {
      std::fprintf(stderr, "hearth-node: error: %s\n", node.refusal().c_str());
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hearth-node: error: %s\n", e.what());
    return 1;
  }
}
