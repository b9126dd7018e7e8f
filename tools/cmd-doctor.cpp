// hearth doctor: on any machine of the homelab, whether the broker answers (and who we are to it),
// whether this machine's node is registered and online, which models and devices it serves, and
// what to look at when something is wrong. Exits 0 when nothing is wrong, 1 otherwise.
//
// Its keys are the CLI's (flags, environment, ~/.config/hearth); on a machine that has none of
// those, the node's own (broker:, broker_key: and key: of its node.yaml), so that `sudo hearth
// doctor` works on a node's machine as it is installed. The broker answers a node key's whoami
// with unauthorized: it let the key in, but a node key may not list nodes or models, so the
// doctor then checks the node's side on this machine (its models folder as the node reads it)
// and says what it could not check.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "backends/registry.h"
#include "node/config.h"
#include "node/model-catalog.h"
#include "schema/endpoint.h"
#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct doctor_options {
  broker_options broker;
  std::string node;         // the node to look for; "" = this machine's (node config, else host)
  std::string node_config;  // the node's YAML file, for its name
  int timeout_s = 5;
};

// Prints one finding: "ok", "problem" or "note", then the text (lines after the first indented).
class report {
 public:
  void ok(const std::string& what) { line("ok     ", what); }
  void note(const std::string& what) { line("note   ", what); }
  void problem(const std::string& what) {
    line("PROBLEM", what);
    ++problems_;
  }
  int problems() const { return problems_; }

 private:
  static void line(const char* tag, const std::string& what) {
    std::string s = what;
    for (size_t i = s.find('\n'); i != std::string::npos; i = s.find('\n', i + 1))
      s.insert(i + 1, "         ");
    std::printf("%s  %s\n", tag, s.c_str());
  }
  int problems_ = 0;
};

// This machine's node configuration, when there is one that loads.
struct local_node_config {
  std::string path;
  node::node_config cfg;
  bool loaded = false;
};

local_node_config load_local_node_config(const doctor_options& o) {
  local_node_config n;
  n.path = o.node_config.empty() ? "/etc/hearth/node.yaml" : o.node_config;
  std::error_code ec;
  if (std::filesystem::exists(n.path, ec)) n.loaded = bool(node::node_config_load(n.path, n.cfg));
  return n;
}

// The node this machine runs: --node, else the name in its configuration, else the host name
// (as hearth-node picks it). `from` says where the name came from.
std::string local_node_name(const doctor_options& o, const local_node_config& n,
                            std::string& from) {
  if (!o.node.empty()) {
    from = "--node";
    return o.node;
  }
  if (n.loaded && !n.cfg.name.empty()) {
    from = n.path;
    return n.cfg.name;
  }
  from = "the host name";
  return node::node_host_name();
}

std::string models_text(const std::vector<wire::model_info>& models) {
  std::string s;
  for (const auto& m : models) s += (s.empty() ? "" : ", ") + m.name + (m.loaded ? "*" : "");
  return s.empty() ? "none" : s + " (* = loaded)";
}

std::string devices_text(const wire::hardware_info& hw) {
  std::string s = hw.cpu_model + " (" + std::to_string(hw.cpu_threads) + " threads, " +
                  format_bytes(hw.memory_total) + ")";
  for (const auto& g : hw.gpus)
    s += "; " + g.backend + ": " + g.name + " (" + format_bytes(g.memory_total) + ")";
  return s;
}

// What this machine's GPU backends say (whether or not a node runs here), then the count of
// problems; the exit code.
int doctor_finish(report& r) {
  std::string report_lines;
  for (const auto& line : gpu::registry_report(gpu::device_registry()))
    report_lines += (report_lines.empty() ? "" : "\n") + line;
  r.note("this machine's backends:\n" + report_lines);
  if (r.problems() > 0) {
    std::fprintf(stderr, "%d problem%s found\n", r.problems(), r.problems() == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

// With a node key the broker says nothing about nodes: what the node's configuration on this
// machine says instead (its broker, and its models folder read as the node reads it).
void check_node_side(report& r, const local_node_config& n, const std::string& endpoint) {
  if (!n.loaded) return;
  if (n.cfg.broker != endpoint) {
    r.problem("the node's " + n.path + " says broker: " + n.cfg.broker + ", not " + endpoint);
  }
  if (n.cfg.models_dir.empty()) {
    // A models folder is optional: such a node serves its store's models alone.
    r.ok("the node's " + n.path + " names no models folder: it serves the models of its store");
    return;
  }
  try {
    const auto catalog = node::model_catalog::scan(n.cfg.models_dir);
    std::vector<wire::model_info> models = catalog.models();
    if (models.empty()) {
      r.problem("the node's models folder " + n.cfg.models_dir +
                " has no model: put *.gguf files or Hugging Face folders there");
    } else {
      std::string names;
      for (const auto& m : models) names += (names.empty() ? "" : ", ") + m.name;
      r.ok("the node's models folder " + n.cfg.models_dir + ": " + names);
    }
    for (const auto& e : catalog.errors()) r.problem("it skips " + e.path + ": " + e.error);
  } catch (const std::exception& e) {
    r.problem(std::string("the node's models folder: ") + e.what());
  }
}

int doctor(const doctor_options& o) {
  report r;
  const local_node_config node_cfg = load_local_node_config(o);
  // Where the CLI's own settings say nothing, the node's (see the top of this file).
  const char* env_broker = std::getenv("HEARTH_BROKER");
  const bool endpoint_from_node =
      o.broker.endpoint.empty() && !(env_broker && *env_broker) && node_cfg.loaded;
  const std::string endpoint =
      endpoint_from_node ? node_cfg.cfg.broker : broker_endpoint(o.broker.endpoint);
  for (auto check : {net::endpoint_check, net::endpoint_host_check}) {
    if (auto ok = check(endpoint); !ok) {
      r.problem(ok.message());
      return 1;
    }
  }
  r.ok("broker endpoint " + endpoint + (endpoint_from_node ? " (from " + node_cfg.path + ")" : ""));

  // Keys: which ones this command would use, or why it cannot.
  net::curve_client_keys keys;
  try {
    keys = broker_keys(o.broker.broker_key, o.broker.key);
  } catch (const std::exception& e) {
    r.problem(e.what());
    return 1;
  }
  if (!keys.enabled() && node_cfg.loaded && !node_cfg.cfg.key.empty()) {
    if (auto k = net::curve_client_keys_load(node_cfg.cfg.broker_key, node_cfg.cfg.key)) {
      keys = std::move(k).value();
      r.note("using the node's keys from " + node_cfg.path + " (" + node_cfg.cfg.key + ")");
    } else {
      r.note("the node's key cannot be read here (" + k.message() +
             "); as root (sudo hearth doctor) it can");
    }
  }
  if (keys.broker_public.empty()) {
    r.note(
        "no keys: talking plain ZMTP, which only a broker without --auth accepts\n"
        "(give --broker-key and --key, $HEARTH_BROKER_KEY and $HEARTH_KEY, or put broker.pub and "
        "client.key in ~/.config/hearth)");
  }

  std::string from;  // where the node's name came from
  broker_client client(endpoint, keys, std::chrono::seconds(o.timeout_s));
  wire::identity me;
  try {
    me = client.request<wire::identity>(wire::whoami{});
  } catch (const broker_timeout&) {
    r.problem("the broker at " + endpoint + " did not answer within " +
              std::to_string(o.timeout_s) +
              " s\n"
              "is hearth-broker running there (systemctl status hearth-broker)? does it listen on "
              "that address (bind: in its broker.yaml; 127.0.0.1 is this machine only)? does a "
              "firewall let the port through? with --auth: is this machine's key in its "
              "auth/clients/ or auth/admins/, and is the broker.pub used here its key?");
    return 1;
  } catch (const broker_error& e) {
    if (e.code() != wire::error_code::unauthorized) {
      r.problem(std::string("the broker at ") + endpoint + ": " + e.what());
      return 1;
    }
    // The key got in (the handshake passed) but may not ask whoami: with --auth only a node key.
    r.ok("the broker answers and lets this key in as a node's key");
    r.note("whether node '" + local_node_name(o, node_cfg, from) +
           "' is online and what the broker sees of it needs a client or admin key: not checked "
           "here (the broker says: " +
           std::string(e.what()) +
           ")\non the broker's machine: sudo hearth doctor --key /etc/hearth/admin.key "
           "--broker-key /etc/hearth/broker.pub --node NAME");
    check_node_side(r, node_cfg, endpoint);
    return doctor_finish(r);
  } catch (const std::exception& e) {
    r.problem(std::string("the broker at ") + endpoint + ": " + e.what());
    return 1;
  }
  r.ok("the broker answers; to it you are " +
       (me.name.empty() ? std::string("anonymous") : me.name) + " (role " +
       (me.role.empty() ? std::string("client") : me.role) + ")");

  const auto nodes = client.request<wire::nodes_reply>(wire::list_nodes{});
  const size_t online = size_t(std::count_if(nodes.nodes.begin(), nodes.nodes.end(),
                                             [](const auto& n) { return n.online; }));
  if (online == 0) {
    r.problem("no node is online: jobs will wait (hearth nodes lists the ones the broker knows)");
  } else {
    r.ok(std::to_string(online) + " node" + (online == 1 ? "" : "s") + " online of " +
         std::to_string(nodes.total > 0 ? nodes.total : nodes.nodes.size()));
  }

  const std::string name = local_node_name(o, node_cfg, from);
  const auto it = std::find_if(nodes.nodes.begin(), nodes.nodes.end(),
                               [&](const auto& n) { return n.name == name; });
  if (it == nodes.nodes.end()) {
    const std::string what =
        "no node named '" + name + "' (from " + from + ") has registered with this broker";
    if (from == "--node") {
      r.problem(what);
    } else {
      r.note(what +
             "; if this machine should serve models: is hearth-node running here (systemctl "
             "status hearth-node, journalctl -u hearth-node)? is its broker: this broker? with "
             "--auth, is its key in the broker's auth/nodes/?");
    }
  } else if (!it->online) {
    r.problem("node '" + name + "' is offline (last seen " +
              format_ago(it->last_seen_ms, net::wall_ms()) +
              ")\nis hearth-node running there (systemctl status hearth-node, journalctl -u "
              "hearth-node)? can it reach " +
              endpoint + "?");
  } else {
    r.ok("node '" + name + "' is online: " + it->engine + ", " + std::to_string(it->running) + "/" +
         std::to_string(it->slots) + " slots busy");
    r.ok("its devices: " + devices_text(it->hardware));
    if (it->models.empty()) {
      r.problem("node '" + name +
                "' serves no model: put *.gguf files or Hugging Face folders in its models "
                "folder (models: in its node.yaml; /var/lib/hearth/models for the package)");
    } else {
      r.ok("its models: " + models_text(it->models));
    }
    const auto models = client.request<wire::models_reply>(wire::list_models{});
    for (const auto& s : models.skipped) {
      if (s.node != name) continue;
      for (const auto& f : s.files) r.problem("it skips " + f.file + ": " + f.error);
    }
  }

  return doctor_finish(r);
}

}  // namespace

action add_doctor(CLI::App& app) {
  auto o = std::make_shared<doctor_options>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check this machine's place in the homelab: the broker answers, this machine's node is "
      "registered and online, its models and devices, what is wrong if not");
  cmd->add_option("--node", o->node,
                  "The node to check (default: the name in the node's YAML file, else the host "
                  "name, as hearth-node picks it)");
  cmd->add_option("--node-config", o->node_config,
                  "The node's YAML file, for its name (default /etc/hearth/node.yaml)");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the broker (default 5)")
      ->check(CLI::Range(1, 600));
  add_broker_options(cmd, o->broker);
  return [o] { return doctor(*o); };
}

}  // namespace hearth::cli
