// hearth jobs: the job history, newest first, as a table or a JSON array.
#include <cstdio>
#include <stdexcept>

#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"

namespace hearth::cli {
namespace {

struct jobs_options {
  broker_options broker;
  std::string state;
  std::string model;
  uint32_t limit = 20;
  bool json = false;
};

// How long the job ran, or has been running; "-" before it started.
std::string job_duration(const wire::job_summary& j, int64_t now_ms) {
  if (j.started_ms <= 0) return "-";
  return format_duration((j.finished_ms > 0 ? j.finished_ms : now_ms) - j.started_ms);
}

int jobs(const jobs_options& o) {
  if (!o.state.empty() && !wire::job_state_from_name(o.state)) {
    std::string valid;
    for (auto s : {wire::job_state::queued, wire::job_state::running, wire::job_state::completed,
                   wire::job_state::failed, wire::job_state::cancelled}) {
      valid += (valid.empty() ? "" : ", ") + std::string(wire::job_state_name(s));
    }
    throw std::runtime_error("unknown job state '" + o.state + "' (valid: " + valid + ")");
  }
  broker_client client(o.broker);
  wire::list_jobs req;
  req.state = o.state;
  req.model = o.model;
  req.limit = o.limit;
  const auto reply = client.request<wire::jobs_reply>(req);

  if (o.json) {
    print_json(wire_json(reply.jobs));
    return 0;
  }
  if (reply.jobs.empty()) {
    std::fprintf(stderr, "no jobs\n");
    return 0;
  }
  const int64_t now = net::wall_ms();
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : reply.jobs) {
    rows.push_back({std::to_string(j.job_id), std::string(wire::job_state_name(j.state)), j.model,
                    or_dash(j.node), std::to_string(j.attempts), std::to_string(j.n_prompt),
                    std::to_string(j.n_gen), format_local_time(j.created_ms),
                    job_duration(j, now)});
  }
  print_table({"ID", "STATE", "MODEL", "NODE", "ATTEMPTS", "PROMPT", "GEN", "CREATED", "DURATION"},
              rows);
  return 0;
}

}  // namespace

action add_jobs(CLI::App& app) {
  auto o = std::make_shared<jobs_options>();
  CLI::App* cmd = app.add_subcommand(
      "jobs", "List jobs, newest first (PROMPT and GEN count tokens; DURATION is run time)");
  cmd->add_option("--state", o->state,
                  "Only jobs in this state: queued, running, completed, failed, cancelled");
  cmd->add_option("--model", o->model, "Only jobs for this model");
  cmd->add_option("--limit", o->limit, "At most this many jobs")->capture_default_str();
  cmd->add_flag("--json", o->json, "A JSON array of job summaries (every field)");
  add_broker_options(cmd, o->broker);
  return [o] { return jobs(*o); };
}

}  // namespace hearth::cli
