// hearth up: a broker, a node and the OpenAI HTTP gateway in one process, with defaults that need
// no configuration file; the quickest way to a working service on one machine. Runs until Ctrl-C.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "broker/broker.h"
#include "broker/new-database.h"
#include "gateway/dashboard-files.h"
#include "gateway/gateway.h"
#include "gateway/routes.h"
#include "node/node.h"
#include "schema/curve-cert.h"
#include "store/model-store.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop = true;
}

// $XDG_DATA_HOME/hearth, else ~/.local/share/hearth.
std::string data_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/hearth";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/hearth";
  return ".";
}

// Runs `serve` (a broker's or the gateway's loop) on a thread of its own; what it throws is kept
// in `error` and stops the rest.
template <class F>
std::thread serve_on_thread(F serve, std::exception_ptr& error) {
  return std::thread([serve = std::move(serve), &error] {
    try {
      serve();
    } catch (...) {
      error = std::current_exception();
      g_stop = true;
    }
  });
}

// The keys of the parts of `hearth up` that connect to its broker.
struct up_keys {
  std::string broker_public;
  std::string node_key;
  std::string gateway_key;
};

// With --auth DIR: the broker's key folder, made on first use (broker.key, nodes/, clients/,
// admins/), and the keys of the node (DIR/up-node.key, allowed in nodes/) and of the HTTP
// gateway (DIR/up-gateway.key, a client key: without an API key, HTTP requests see only the
// gateway's own jobs) inside `hearth up`.
up_keys prepare_auth_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const char* sub : {"nodes", "clients", "admins"})
    fs::create_directories(fs::path(dir) / sub);
  auto make = [&](const std::string& name) {
    if (fs::exists(dir + "/" + name + ".key")) return;
    auto c = net::curve_cert_generate(name);
    if (!c) throw std::runtime_error(c.message());
    if (auto r = net::curve_cert_save(*c, dir, name); !r) throw std::runtime_error(r.message());
    std::fprintf(stderr, "hearth up: made %s/%s.key and %s.pub\n", dir.c_str(), name.c_str(),
                 name.c_str());
  };
  auto allow = [&](const std::string& name, const std::string& role_dir) {
    make(name);
    const std::string allowed = dir + "/" + role_dir + "/" + name + ".pub";
    if (!fs::exists(allowed)) fs::copy_file(dir + "/" + name + ".pub", allowed);
  };
  make("broker");
  allow("up-node", "nodes");
  allow("up-gateway", "clients");
  return {dir + "/broker.pub", dir + "/up-node.key", dir + "/up-gateway.key"};
}

// The name of the user running this process, for the admin key's .pub (the owner of its jobs).
std::string up_user_name() {
  if (const passwd* pw = getpwuid(geteuid()); pw && pw->pw_name && *pw->pw_name) return pw->pw_name;
  return "admin";
}

// The public key of a certificate file, or "" when it does not load.
std::string up_public_key_of(const std::string& path) {
  auto c = net::curve_cert_load(path);
  return c ? c->public_key : std::string();
}

// An admin key for the user who runs `hearth up --auth DIR`, where the CLI finds keys by default
// (client_config_dir(): client.key beside the broker's broker.pub), so that the admin commands
// (hearth apikey create, jobs prune, nodes forget) and every other one work on this machine at
// once; its .pub goes into DIR/admins/ under the user's name. A folder that has keys already is
// not touched: when they are for this broker nothing is needed, else the admin key is
// DIR/up-admin.key and the line printed says how to use it.
void prepare_user_admin_key(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg = client_config_dir();
  const std::string user = up_user_name();
  std::error_code ec;
  const bool has_key = !cfg.empty() && fs::exists(cfg + "/client.key", ec);
  const bool has_broker = !cfg.empty() && fs::exists(cfg + "/broker.pub", ec);
  if (!cfg.empty() && !has_key && !has_broker) {
    auto c = net::curve_cert_generate(user);
    if (!c) throw std::runtime_error(c.message());
    if (auto r = net::curve_cert_save(*c, cfg, "client"); !r) throw std::runtime_error(r.message());
    fs::copy_file(dir + "/broker.pub", cfg + "/broker.pub");
    std::string allowed = dir + "/admins/" + user + ".pub";
    if (fs::exists(allowed, ec)) allowed = dir + "/admins/" + user + "-up.pub";
    fs::copy_file(cfg + "/client.pub", allowed, fs::copy_options::overwrite_existing);
    std::fprintf(stderr,
                 "hearth up: made an admin key for you (%s): %s/client.key, allowed as %s; with "
                 "%s/broker.pub, hearth commands on this machine use it by default\n",
                 user.c_str(), cfg.c_str(), allowed.c_str(), cfg.c_str());
    return;
  }
  if (has_key && has_broker &&
      up_public_key_of(cfg + "/broker.pub") == up_public_key_of(dir + "/broker.pub"))
    return;  // the user's keys are for this broker already
  if (!fs::exists(dir + "/up-admin.key", ec)) {
    auto c = net::curve_cert_generate(user);
    if (!c) throw std::runtime_error(c.message());
    if (auto r = net::curve_cert_save(*c, dir, "up-admin"); !r)
      throw std::runtime_error(r.message());
  }
  const std::string allowed = dir + "/admins/up-admin.pub";
  if (!fs::exists(allowed, ec)) fs::copy_file(dir + "/up-admin.pub", allowed);
  const std::string why = cfg.empty()             ? "$HOME is not set, so"
                          : has_key && has_broker ? cfg + " has keys for another broker, so"
                                                  : cfg + " has keys of its own, so";
  std::fprintf(stderr,
               "hearth up: %s your admin key for this broker is %s/up-admin.key: "
               "HEARTH_KEY=%s/up-admin.key HEARTH_BROKER_KEY=%s/broker.pub hearth ...\n",
               why.c_str(), dir.c_str(), dir.c_str(), dir.c_str());
}

// The endpoint to reach a broker bound to `bind` from this machine: a wildcard host becomes
// loopback.
std::string local_endpoint(const std::string& bind) {
  for (const char* any : {"tcp://*:", "tcp://0.0.0.0:"}) {
    if (bind.starts_with(any)) return "tcp://127.0.0.1:" + bind.substr(std::strlen(any));
  }
  if (bind.starts_with("tcp://[::]:")) return "tcp://[::1]:" + bind.substr(11);
  return bind;
}

// HOST of "HOST:PORT" with the bound port, for the startup line.
std::string http_address(const std::string& listen, uint16_t port) {
  return "http://" + listen.substr(0, listen.rfind(':')) + ":" + std::to_string(port);
}

// What the node serves, for the startup line: the store always (where `hearth pull` puts models),
// and the models folder when one was given.
std::string up_served(const std::string& models, const std::string& store) {
  const std::string root = store.empty() ? store::default_store_root().string() : store;
  return (models.empty() ? "" : models + " and ") + "the store " + root;
}

}  // namespace

action add_up(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "up", "Run a broker, a node and the OpenAI HTTP API on this machine until Ctrl-C");
  struct options {
    std::string models, store, bind = "tcp://127.0.0.1:5555", db, name, engine = "cpu";
    std::string backend = "auto";
    std::string auth, http = "127.0.0.1:8080";
    bool insecure = false;
    uint32_t slots = node::node_config{}.slots;
    int32_t threads = 0;
    int32_t device = -1;
  };
  auto o = std::make_shared<options>();
  cmd->add_option("--models", o->models,
                  "directory of GGUF models and Hugging Face folders to serve besides the store's "
                  "(default: none)");
  cmd->add_option("--store", o->store,
                  "the model store whose models the node serves, where `hearth pull` puts them "
                  "(default $HEARTH_STORE, else ~/.local/share/hearth/store)");
  cmd->add_option("--bind", o->bind, "broker endpoint")->capture_default_str();
  cmd->add_option("--auth", o->auth,
                  "key folder (made on first use): CURVE, and only keys in its nodes/, clients/ "
                  "and admins/ may connect; needed to bind anything but loopback");
  cmd->add_flag("--insecure", o->insecure,
                "bind a non-loopback address without authentication (anyone may connect)");
  cmd->add_option("--http", o->http,
                  "HOST:PORT of the OpenAI HTTP API (hearth-gateway), or off; anything but "
                  "loopback requires API keys (or --insecure)")
      ->capture_default_str();
  cmd->add_option("--db", o->db, "job database (default: <data dir>/hearth/hearth.db)");
  cmd->add_option("--name", o->name, "node name (default: the hostname)");
  cmd->add_option("--slots", o->slots, "jobs the node runs at once")->capture_default_str();
  cmd->add_option("--engine", o->engine, "cpu, or null for fake tokens")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all cores)");
  cmd->add_option("--backend", o->backend,
                  "cpu, cuda, vulkan, or auto (a CUDA GPU if there is one, else a Vulkan GPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "vulkan", "auto"}))
      ->capture_default_str();
  cmd->add_option("--device", o->device,
                  "device index of that backend (hearth devices); -1: the best")
      ->capture_default_str();
  return [o]() {
    if (o->db.empty()) {
      const std::string dir = data_dir();
      std::filesystem::create_directories(dir);
      o->db = dir + "/hearth.db";
    }
    spdlog::set_default_logger(spdlog::stderr_color_mt("hearth"));  // stdout is for output
    spdlog::set_pattern("%H:%M:%S.%e %^%l%$ %v");
    broker::broker_config bc;
    bc.bind = o->bind;
    bc.db = o->db;
    bc.insecure = o->insecure;
    if (auto r = broker::broker_config_check_exposure(bc); !r && o->auth.empty()) {
      throw std::runtime_error(r.message());
    }
    broker::new_database created(bc.db);
    auto store = broker::job_store::open(bc.db, broker::broker_store_options(bc));
    if (!store) throw std::runtime_error(store.message());

    node::node_config nc;
    nc.broker = o->bind;
    nc.models_dir = o->models;
    nc.store = o->store;
    nc.name = o->name;
    nc.slots = o->slots;
    nc.engine = o->engine;
    nc.threads = o->threads;
    auto kind = node::node_backend_parse(o->backend);
    if (!kind) throw std::runtime_error(kind.message());
    nc.backend = *kind;
    nc.device = o->device;
    gateway::gateway_options go;
    go.listen = o->http;
    go.broker = local_endpoint(o->bind);
    go.insecure = o->insecure;
    go.db = (std::filesystem::path(o->db).parent_path() / "gateway.db").string();
    go.dashboard = gateway::dashboard_files();
    if (!o->auth.empty()) {
      bc.auth = o->auth;
      const up_keys keys = prepare_auth_dir(o->auth);
      prepare_user_admin_key(o->auth);
      nc.broker_key = keys.broker_public;
      nc.key = keys.node_key;
      go.broker_key = keys.broker_public;
      go.key = keys.gateway_key;
      std::fprintf(stderr,
                   "hearth up: authentication on; give nodes and clients %s/broker.pub, and put "
                   "their .pub files in %s/nodes/ or %s/clients/\n",
                   o->auth.c_str(), o->auth.c_str(), o->auth.c_str());
    }
    node::node_daemon node(nc);  // scans the models directory and the store; throws on a bad one

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    broker::broker b(bc, std::move(store.value()));
    std::atomic<bool> broker_stop{false};
    std::exception_ptr broker_error;
    std::thread broker_thread = serve_on_thread([&] { b.run(broker_stop); }, broker_error);
    while (!b.bound() && !broker_error) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (b.bound()) created.keep();

    // The HTTP gateway, a client of the broker like any other, on its own I/O thread.
    std::unique_ptr<gateway::gateway> http;
    std::exception_ptr http_error;
    std::thread http_thread;
    if (o->http != "off" && !broker_error) {
      try {
        http = std::make_unique<gateway::gateway>(go, gateway::add_routes);
        http_thread = serve_on_thread([&] { http->run(g_stop); }, http_error);
        while (!http->bound() && !http_error) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      } catch (...) {
        http_error = std::current_exception();
      }
    }
    const bool failed = broker_error || http_error;
    if (!failed) {
      const std::string api = http ? ", OpenAI API on " + http_address(go.listen, http->port()) +
                                         (go.dashboard.empty() ? "" : " (dashboard: /)")
                                   : ", no HTTP API";
      std::fprintf(
          stderr, "hearth up: broker on %s%s, database %s, node serving %s; Ctrl-C stops\n",
          o->bind.c_str(), api.c_str(), o->db.c_str(), up_served(o->models, o->store).c_str());
    }
    const int rc = failed ? 1 : node.run(g_stop);
    // The node said goodbye (its jobs handed back); now the gateway and the broker may stop.
    g_stop = true;
    if (http_thread.joinable()) http_thread.join();
    http.reset();
    broker_stop = true;
    broker_thread.join();
    if (broker_error) std::rethrow_exception(broker_error);
    if (http_error) {
      try {
        std::rethrow_exception(http_error);
      } catch (const std::exception& e) {
        throw std::runtime_error("the HTTP API on " + o->http + ": " + e.what() +
                                 " (choose another with --http HOST:PORT, or --http off)");
      }
    }
    return rc;
  };
}

}  // namespace hearth::cli
