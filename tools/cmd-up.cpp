// hearth up: a broker and a node in one process, with defaults that need no configuration file;
// the quickest way to a working service on one machine. Runs until Ctrl-C.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <tuple>

#include "broker/broker.h"
#include "node/node.h"
#include "schema/curve-cert.h"
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

// With --auth DIR: the broker's key folder, made on first use (broker.key, nodes/, clients/,
// admins/), and the key of the node inside `hearth up` (DIR/up-node.key, allowed in nodes/).
// Returns the node's broker_key and key.
std::pair<std::string, std::string> prepare_auth_dir(const std::string& dir) {
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
  make("broker");
  make("up-node");
  const std::string allowed = dir + "/nodes/up-node.pub";
  if (!fs::exists(allowed)) fs::copy_file(dir + "/up-node.pub", allowed);
  return {dir + "/broker.pub", dir + "/up-node.key"};
}

}  // namespace

action add_up(CLI::App& app) {
  auto* cmd = app.add_subcommand("up", "Run a broker and a node on this machine until Ctrl-C");
  struct options {
    std::string models, bind = "tcp://127.0.0.1:5555", db, name, engine = "cpu", backend = "auto";
    std::string auth;
    bool insecure = false;
    uint32_t slots = 2;
    int32_t threads = 0;
    int32_t device = -1;
  };
  auto o = std::make_shared<options>();
  cmd->add_option("--models", o->models, "directory of GGUF models to serve")->required();
  cmd->add_option("--bind", o->bind, "broker endpoint")->capture_default_str();
  cmd->add_option("--auth", o->auth,
                  "key folder (made on first use): CURVE, and only keys in its nodes/, clients/ "
                  "and admins/ may connect; needed to bind anything but loopback");
  cmd->add_flag("--insecure", o->insecure,
                "bind a non-loopback address without authentication (anyone may connect)");
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
    auto store = broker::job_store::open(bc.db, broker::broker_store_options(bc));
    if (!store) throw std::runtime_error(store.message());

    node::node_config nc;
    nc.broker = o->bind;
    nc.models_dir = o->models;
    nc.name = o->name;
    nc.slots = o->slots;
    nc.engine = o->engine;
    nc.threads = o->threads;
    auto kind = node::node_backend_parse(o->backend);
    if (!kind) throw std::runtime_error(kind.message());
    nc.backend = *kind;
    nc.device = o->device;
    if (!o->auth.empty()) {
      bc.auth = o->auth;
      std::tie(nc.broker_key, nc.key) = prepare_auth_dir(o->auth);
      std::fprintf(stderr,
                   "hearth up: authentication on; give nodes and clients %s/broker.pub, and put "
                   "their .pub files in %s/nodes/ or %s/clients/\n",
                   o->auth.c_str(), o->auth.c_str(), o->auth.c_str());
    }
    node::node_daemon node(nc);  // scans the models directory; throws on a bad one

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    broker::broker b(bc, std::move(store.value()));
    std::atomic<bool> broker_stop{false};
    std::exception_ptr broker_error;
    std::thread broker_thread([&] {
      try {
        b.run(broker_stop);
      } catch (...) {
        broker_error = std::current_exception();
        g_stop = true;
      }
    });
    while (!b.bound() && !broker_error) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!broker_error) {
      std::fprintf(stderr, "hearth up: broker on %s, database %s, node serving %s; Ctrl-C stops\n",
                   o->bind.c_str(), o->db.c_str(), o->models.c_str());
    }
    const int rc = broker_error ? 1 : node.run(g_stop);
    // The node said goodbye (its jobs handed back); now the broker may stop.
    broker_stop = true;
    broker_thread.join();
    if (broker_error) std::rethrow_exception(broker_error);
    return rc;
  };
}

}  // namespace hearth::cli
