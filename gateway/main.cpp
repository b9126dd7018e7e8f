// hearth-gateway: the OpenAI HTTP API in front of a hearth broker. Flags for the essentials, YAML
// for the rest (gateway/config.h, deploy/gateway.example.yaml), then the I/O loop until SIGINT or
// SIGTERM.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "common/daemon.h"
#include "common/yaml-settings.h"
#include "gateway/config.h"
#include "gateway/dashboard-files.h"
#include "gateway/routes.h"
#include "schema/endpoint.h"
#include "schema/version.h"

int main(int argc, char** argv) {
  using namespace hearth::gateway;
  CLI::App app{
      "hearth-gateway: the OpenAI HTTP API (chat, completions, models, batches) in front "
      "of a hearth broker"};
  std::string listen, broker, broker_key, key, tls_cert, tls_key, db, config_path, log_level;
  std::vector<std::string> cors, allow_hosts;
  bool insecure = false;
  app.add_option("--listen", listen, "HOST:PORT to serve HTTP on (default 127.0.0.1:8080)");
  app.add_option("--broker", broker,
                 "the broker's endpoint, tcp://HOST:PORT (default $HEARTH_BROKER, else "
                 "tcp://127.0.0.1:5555)");
  app.add_option("--broker-key", broker_key,
                 "the broker's public certificate (a broker run with --auth)");
  app.add_option("--key", key, "the gateway's own secret certificate (a client or admin key)");
  app.add_flag("--insecure", insecure,
               "serve a non-loopback address without requiring API keys (anyone who reaches it "
               "acts as the gateway's key)");
  app.add_option("--tls-cert", tls_cert, "PEM certificate: serve HTTPS (with --tls-key)");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  app.add_option("--cors", cors, "an origin allowed by CORS, or '*' (repeatable)");
  app.add_option("--allow-host", allow_hosts,
                 "a name of this machine (HOST or HOST:PORT) that requests may give in Host where "
                 "no API key is needed, e.g. hub:8080, or '*' (repeatable; IP addresses and "
                 "localhost always may)");
  app.add_option("--db", db, "SQLite file for batches and uploaded files (default gateway.db)");
  app.add_option("--config", config_path, "YAML file with further settings");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
  app.set_version_flag("--version", hearth::wire::version_line("hearth-gateway"));
  CLI11_PARSE(app, argc, argv);

  gateway_config cfg;
  // $HEARTH_BROKER stands in for the default, as for the CLI; the file and the flags win.
  if (const char* env = std::getenv("HEARTH_BROKER"); env && *env) cfg.options.broker = env;
  if (!config_path.empty()) {
    if (auto r = gateway_config_load(config_path, cfg); !r) {
      std::fprintf(stderr, "hearth-gateway: error: %s\n", r.message().c_str());
      return 2;
    }
  }
  auto& o = cfg.options;
  if (!listen.empty()) o.listen = listen;
  if (!broker.empty()) o.broker = broker;
  if (!broker_key.empty()) o.broker_key = broker_key;
  if (!key.empty()) o.key = key;
  if (insecure) o.insecure = true;
  if (!tls_cert.empty()) o.tls_cert = tls_cert;
  if (!tls_key.empty()) o.tls_key = tls_key;
  if (!cors.empty()) o.cors_origins = cors;
  if (!allow_hosts.empty()) o.allowed_hosts = allow_hosts;
  if (!db.empty()) o.db = db;
  if (!log_level.empty()) cfg.log_level = log_level;
  if (auto r = hearth::net::endpoint_check(o.broker); !r) {
    std::fprintf(stderr, "hearth-gateway: error: --broker: %s\n", r.message().c_str());
    return 2;
  }
  if (!hearth::log_level_valid(cfg.log_level)) {
    std::fprintf(stderr,
                 "hearth-gateway: error: --log-level '%s': expected trace, debug, info, warn, "
                 "error or off\n",
                 cfg.log_level.c_str());
    return 2;
  }
  // Each message names its part (gateway:, http:, broker link:), as inside `hearth up`.
  hearth::daemon_log_to_stderr(cfg.log_level, "");

  hearth::daemon_stop_on_signals();
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not a signal
  try {
    o.dashboard = dashboard_files();
    gateway g(o, add_routes);
    g.run(hearth::daemon_stop);  // the server says where it listens
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hearth-gateway: error: %s\n", e.what());
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}
