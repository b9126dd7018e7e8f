// Following one job's events over the blocking face until it ends (hearth submit, hearth watch):
// each event handed to a job_stream in the broker's order. When the broker goes away (the
// connection drops, or a silent broker does not answer a probe), the follower re-attaches on a
// fresh socket with what the stream has of the current attempt (watch with attempt/seq/
// output_offset, from job_stream::resume_point()), trying again with backoff for retry_for
// (client/broker-retry.h), so the stream goes on without duplicates or holes. A job that ended
// without its job_done reaching us is found by asking for its record.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "client/broker-client.h"
#include "client/reconnect-policy.h"
#include "client/stream-order.h"
#include "common/result.h"
#include "schema/messages.h"

namespace hearth::client {

// What a followed job's events go to: the CLI's text view and its JSON lines (tools/) are two.
// stream_order (client/stream-order.h) keeps the stream's order; resume_point() and
// expect_resume() are its.
class job_stream {
 public:
  virtual ~job_stream() = default;
  // Decodes a job event's body and takes it; an error when it does not decode. Other commands
  // and other jobs' events are ignored.
  virtual result<void> feed(wire::command cmd, std::string_view body) = 0;
  // The job ended without its job_done reaching us (found by asking the broker): `output` is
  // the job's whole output.
  virtual void on_final(const wire::job_summary& s, const std::string& output) = 0;
  // Nothing came for `silent_ms` while the job's record says it is in `s`'s state.
  virtual void on_silence(const wire::job_summary& s, int64_t silent_ms) = 0;
  // A line (ending in a newline) from outside the stream: the broker does not answer, answers
  // again (client/broker-retry.h's notices).
  virtual void notice(std::string_view line) = 0;
  // The job's end was taken (job_done or on_final).
  virtual bool done() const = 0;
  // What to re-attach with, and that the re-attach was made (stream_order::expect_resume).
  virtual stream_resume resume_point() const = 0;
  virtual void expect_resume() = 0;
};

struct job_follow_options {
  // Send watch first: the client is not watching the job yet (hearth watch, or a submit whose
  // reply came on a later try, whose watch flag was not sent).
  bool attach = false;
  std::chrono::seconds retry_for = reconnect_policy::retry_for;
  bool retry_for_given = false;  // the user chose retry_for (client/broker-retry.h)
  // When given and true, the following stops at once (the CLI's Ctrl-C).
  std::function<bool()> stop;
};

enum class follow_end {
  ended,    // the stream is done()
  stopped,  // `stop` said so first
};

// Follows job `job_id` into `s` until it is done() or `stop` says so. Throws broker_error /
// broker_timeout / broker_unreachable as broker_retry does when re-attaching fails, and
// std::runtime_error on a malformed event or an error_reply for the watch.
follow_end follow_job_events(broker_client& client, uint64_t job_id, job_stream& s,
                             const job_follow_options& o);

}  // namespace hearth::client
