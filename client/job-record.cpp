#include "client/job-record.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace hearth::client {

bool read_job(broker_client& client, uint64_t job_id, const job_record_fn& on_record,
              const job_output_fn& on_output) {
  for (int tries = 0; tries < 5; ++tries) {
    wire::get_job req;
    req.job_id = job_id;
    req.max_output_bytes = wire::job_page_bytes_max;
    req.max_prompt_bytes = wire::job_page_bytes_max;
    auto reply = client.request<wire::job_reply>(req);
    wire::job_detail d = std::move(reply.job);
    const uint32_t attempts = d.summary.attempts;
    // The output pages that come along with the prompt's, until the prompt is whole.
    std::vector<std::string> held;
    uint64_t have = d.output.size();
    held.push_back(std::move(d.output));
    d.output.clear();
    bool restarted = false;
    while (!restarted && d.prompt.size() < reply.prompt_total_bytes) {
      req.output_offset = have;
      req.prompt_offset = d.prompt.size();
      reply = client.request<wire::job_reply>(req);
      restarted = reply.job.summary.attempts != attempts ||
                  reply.output_offset != req.output_offset ||
                  reply.prompt_offset != req.prompt_offset || reply.job.prompt.empty();
      d.prompt += reply.job.prompt;
      have += reply.job.output.size();
      held.push_back(std::move(reply.job.output));
    }
    if (restarted) continue;
    uint64_t total = reply.output_total_bytes;
    req.prompt_offset = d.prompt.size();
    on_record(std::move(d));
    for (const auto& page : held) {
      if (!page.empty()) on_output(page);
    }
    held.clear();
    // A running job's output grows while its pages are read: the total is the latest page's.
    while (have < total) {
      req.output_offset = have;
      reply = client.request<wire::job_reply>(req);
      if (reply.job.summary.attempts != attempts || reply.output_offset != have ||
          reply.job.output.empty()) {
        return false;
      }
      have += reply.job.output.size();
      total = reply.output_total_bytes;
      on_output(reply.job.output);
    }
    return true;
  }
  throw std::runtime_error("job " + std::to_string(job_id) +
                           " kept restarting while its output was read; try again");
}

wire::job_detail fetch_job(broker_client& client, uint64_t job_id) {
  for (int tries = 0; tries < 5; ++tries) {
    wire::job_detail d;
    const bool whole = read_job(
        client, job_id, [&](wire::job_detail r) { d = std::move(r); },
        [&](std::string_view page) { d.output += page; });
    if (whole) return d;
  }
  throw std::runtime_error("job " + std::to_string(job_id) +
                           " kept restarting while its output was read; try again");
}

}  // namespace hearth::client
