// hearth watch: stream a job's text (or events) from wherever it is now until it ends.
#include "tools/broker-cli.h"
#include "tools/commands.h"
#include "tools/follow-job.h"

namespace hearth::cli {
namespace {

struct watch_options {
  broker_options broker;
  uint64_t job_id = 0;
  bool json = false;
  int retry_for_s = 60;
  CLI::Option* retry_flag = nullptr;
};

int watch(const watch_options& o) {
  broker_client client(o.broker);
  // Whether its output is output events, printed rendered (tools/events-view.h), with reasoning
  // as its submit asked: from the job's record, its pages kept to a byte. A broker that does not
  // answer here is met again by follow_job, which says so.
  wire::job_params params;
  if (!o.json) {
    try {
      wire::get_job g;
      g.job_id = o.job_id;
      g.max_output_bytes = 1;
      g.max_prompt_bytes = 1;
      params = client.request<wire::job_reply>(g).job.params;
    } catch (const std::exception&) {
    }
  }
  return follow_job(client, o.job_id,
                    {.json_lines = o.json,
                     .attach = true,
                     .retry_for = std::chrono::seconds(o.retry_for_s),
                     .retry_for_given = o.retry_flag->count() > 0,
                     .output_events = params.api.events,
                     .show_reasoning = params.show_thinking});
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
  o->retry_flag = add_retry_option(cmd, o->retry_for_s);
  return [o] { return watch(*o); };
}

}  // namespace hearth::cli
