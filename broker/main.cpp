// hearth-broker: flags for the essentials, YAML for the rest (broker/config.h), then the event
// loop until SIGINT or SIGTERM.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "broker/broker.h"
#include "broker/new-database.h"
#include "common/daemon.h"
#include "schema/version.h"

int main(int argc, char** argv) {
  using namespace hearth::broker;
  CLI::App app{"hearth-broker: queues jobs, hands them to nodes, records everything in SQLite"};
  app.set_version_flag("--version", hearth::wire::version_line("hearth-broker"));
  std::string bind, db, config_path, log_level, auth;
  bool insecure = false;
  app.add_option("--bind", bind, "ZeroMQ endpoint to bind (default tcp://127.0.0.1:5555)");
  app.add_option("--db", db, "SQLite database file (default hearth.db)");
  app.add_option("--config", config_path, "YAML file with further settings");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
  app.add_option("--auth", auth,
                 "folder of keys: broker.key and the allowed nodes/, clients/, admins/ (CURVE)");
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without authentication (anyone may connect)");
  CLI11_PARSE(app, argc, argv);

  broker_config cfg;
  if (!config_path.empty()) {
    if (auto r = broker_config_load(config_path, cfg); !r) {
      std::fprintf(stderr, "hearth-broker: error: %s\n", r.message().c_str());
      return 2;
    }
  }
  // Flags win over the file.
  if (!bind.empty()) cfg.bind = bind;
  if (!db.empty()) cfg.db = db;
  if (!log_level.empty()) cfg.log_level = log_level;
  if (!auth.empty()) cfg.auth = auth;
  if (insecure) cfg.insecure = true;
  hearth::daemon_log_to_stderr(cfg.log_level, "broker: ");

  if (auto r = broker_config_check_exposure(cfg); !r) {
    std::fprintf(stderr, "hearth-broker: error: %s\n", r.message().c_str());
    return 2;
  }
  // A file-size limit (ulimit -f) must make a write fail (EFBIG), which the broker survives like
  // a full disk, not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  new_database created(cfg.db);
  auto store = job_store::open(cfg.db, broker_store_options(cfg));
  if (!store) {
    std::fprintf(stderr, "hearth-broker: error: %s\n", store.message().c_str());
    return 1;
  }
  hearth::daemon_stop_on_signals();
  broker b(cfg, std::move(store.value()));
  try {
    b.run(hearth::daemon_stop);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hearth-broker: error: %s\n", e.what());
    if (b.bound()) created.keep();
    return 1;
  }
  created.keep();
  spdlog::info("stopped");
  return 0;
}
