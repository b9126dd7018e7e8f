// hearth cancel: cancel a queued or running job.
#include <cstdio>

#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct cancel_options {
  broker_options broker;
  uint64_t job_id = 0;
  bool json = false;
};

int cancel(const cancel_options& o) {
  broker_client client(o.broker);
  wire::cancel c;
  c.job_id = o.job_id;
  client.request<wire::ok>(c);
  // ok means the broker took the request; a running job ends once its node stops it.
  if (o.json) {
    print_json({{"job_id", o.job_id}, {"cancelled", true}});
  } else {
    std::printf("cancelled job %llu\n", static_cast<unsigned long long>(o.job_id));
  }
  return 0;
}

}  // namespace

action add_cancel(CLI::App& app) {
  auto o = std::make_shared<cancel_options>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel a queued or running job");
  cmd->add_option("id", o->job_id, "Job id")->required();
  cmd->add_flag("--json", o->json, "Print {\"job_id\": N, \"cancelled\": true}");
  add_broker_options(cmd, o->broker);
  return [o] { return cancel(*o); };
}

}  // namespace hearth::cli
