// Following one job's events until it ends (hearth submit --stream, hearth watch): its text
// through a stream_view, or JSON lines. When the broker goes away (the connection drops, or a
// silent broker does not answer a probe), the follower re-attaches with what it has of the
// current attempt (watch with attempt/seq/output_offset), trying again with backoff for
// retry_for (client/broker-retry.h by client/reconnect-policy.h), so the text goes on without
// duplicates or holes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "client/reconnect-policy.h"
#include "tools/broker-cli.h"

namespace hearth::cli {

struct follow_options {
  bool json_lines = false;
  // The queue position known from `accepted`, shown until events come, and why it waits.
  std::optional<uint32_t> position;
  std::string waiting;
  // Send watch first: the client is not watching the job yet (hearth watch, or a submit whose
  // reply came on a later try, whose watch flag was not sent).
  bool attach = false;
  std::chrono::seconds retry_for = client::reconnect_policy::retry_for;
  bool retry_for_given = false;  // --retry-for was given (client/broker-retry.h)
  // After Ctrl-C (tools/interrupt.h, when the command caught it): cancel the job, or leave it
  // running (--detach) and say how to find it; either way the exit code is 130.
  bool cancel_on_interrupt = true;
  // The job's output is output events (its api.events): printed as tools/events-view.h renders
  // them, reasoning too when asked (JSON lines carry them as they come, in "tokens").
  bool output_events = false;
  bool show_reasoning = false;
};

// Returns the exit code: 0 when the job completed, 1 when it failed or was cancelled, 130 after
// Ctrl-C.
int follow_job(broker_client& client, uint64_t job_id, const follow_options& o);

}  // namespace hearth::cli
