// hearth apikey create|list|revoke: the API keys HTTP clients of hearth-gateway present
// (Authorization: Bearer KEY). Admin keys only (schema/PROTOCOL.md section 13.5).
#include <cstdio>

#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct apikey_options {
  broker_options broker;
  std::string name;
  bool admin = false;
  bool json = false;
};

int create(const apikey_options& o) {
  broker_client client(o.broker);
  wire::create_api_key req;
  req.name = o.name;
  req.admin = o.admin;
  const auto r = client.request<wire::api_key_created>(req);
  // The secret goes to stdout alone, so that `KEY=$(hearth apikey create NAME)` works; how to
  // use it goes to stderr.
  std::printf("%s\n", r.key.c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "API key '%s' created. This is the only time its secret is shown: store it now.\n"
               "HTTP clients send it as the header\n  Authorization: Bearer %s\n"
               "(or X-Api-Key: %s); OpenAI clients take it as their api_key.\n",
               r.name.c_str(), r.key.c_str(), r.key.c_str());
  return 0;
}

int list(const apikey_options& o) {
  broker_client client(o.broker);
  const auto r = client.request<wire::api_keys_reply>(wire::list_api_keys{});
  if (o.json) {
    print_json(wire_json(r.keys));
    return 0;
  }
  if (r.keys.empty()) {
    std::fprintf(stderr, "no API keys\n");
    return 0;
  }
  const int64_t now = net::wall_ms();
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : r.keys) {
    rows.push_back({k.name, k.admin ? "admin" : "client", k.prefix + "...",
                    format_local_time(k.created_ms), format_ago(k.last_used_ms, now),
                    k.revoked_ms == 0 ? "-" : format_local_time(k.revoked_ms)});
  }
  print_table({"NAME", "ROLE", "PREFIX", "CREATED", "LAST USED", "REVOKED"}, rows);
  return 0;
}

int revoke(const apikey_options& o) {
  request_by_name<wire::revoke_api_key>(o.broker, o.name);
  std::printf("API key '%s' revoked\n", o.name.c_str());
  return 0;
}

}  // namespace

action add_apikey(CLI::App& app) {
  auto o = std::make_shared<apikey_options>();
  CLI::App* cmd = app.add_subcommand(
      "apikey", "Create, list and revoke the API keys of HTTP clients (admin key needed)");
  cmd->require_subcommand(1);
  CLI::App* create_cmd = cmd->add_subcommand(
      "create", "Make an API key named NAME and print its secret (shown this once)");
  create_cmd
      ->add_option("name", o->name, "1 to 64 of A-Z a-z 0-9 . _ -; unique among keys in force")
      ->required();
  create_cmd->add_flag("--admin", o->admin,
                       "An admin key: it sees and cancels every job (the dashboard's whole view), "
                       "not only its own");
  add_broker_options(create_cmd, o->broker);
  CLI::App* list_cmd =
      cmd->add_subcommand("list", "List API keys: name, prefix, created, last used, revoked");
  list_cmd->add_flag("--json", o->json, "A JSON array of keys (every field)");
  add_broker_options(list_cmd, o->broker);
  CLI::App* revoke_cmd =
      cmd->add_subcommand("revoke", "Revoke the API key NAME: requests presenting it are refused");
  revoke_cmd->add_option("name", o->name, "the key's name")->required();
  add_broker_options(revoke_cmd, o->broker);
  return [o, create_cmd, list_cmd] {
    if (create_cmd->parsed()) return create(*o);
    if (list_cmd->parsed()) return list(*o);
    return revoke(*o);
  };
}

}  // namespace hearth::cli
