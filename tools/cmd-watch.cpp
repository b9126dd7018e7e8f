// hearth watch: stream a job's text (or events) from wherever it is now until it ends.
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct watch_options {
  broker_options broker;
  uint64_t job_id = 0;
  bool json = false;
};

int watch(const watch_options& o) {
  broker_client client(o.broker);
  wire::watch w;
  w.job_id = o.job_id;
  client.request<wire::ok>(w);
  return follow_job(client, o.job_id, o.json);
}

}  // namespace

action add_watch(CLI::App& app) {
  auto o = std::make_shared<watch_options>();
  CLI::App* cmd = app.add_subcommand(
      "watch",
      "Stream a job's text until it ends (its output so far first); exit 0 if it "
      "completed");
  cmd->add_option("id", o->job_id, "Job id")->required();
  cmd->add_flag("--json", o->json, "JSON lines: queued/running/tokens/restarted/done");
  add_broker_options(cmd, o->broker);
  return [o] { return watch(*o); };
}

}  // namespace hearth::cli
