// What a client makes of the broker's messages (schema/PROTOCOL.md): which are job events and
// which replies, the request_id a reply answers, and a job event decoded. Every face of the client
// library (broker-client.h, broker-link.h) and the tests' client read messages through here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/result.h"
#include "schema/codec.h"
#include "schema/messages.h"

namespace hearth::client {

// job_queued, job_running, job_tokens, job_restarted or job_done: a message the broker sends
// unasked, to a client watching the job.
bool is_job_event(wire::command c);

// The request_id a reply answers. Every reply's body (error_reply's too) is a map with
// request_id, so it is read as wire::ok, whose decoder ignores the other fields; an error when
// the body has none.
result<uint64_t> reply_request_id(std::string_view body);

// Why a request got no reply it asked for (the asynchronous face's answer; the blocking face
// throws instead).
struct link_failure {
  bool no_reply = false;  // the broker did not answer in time, or is not connected
  wire::error_code code = wire::error_code::internal;  // when the broker refused (error_reply)
  std::string message;
  // With no_reply: the broker refused the handshake (this client's key), so it cannot be asked
  // until an admin allows the key; `message` says so.
  bool handshake_refused = false;
};

// What a follower of a job receives, in the broker's order. The last event is job_done, or a
// link_failure when the job can no longer be followed (the broker lost it, or refused the watch).
using job_event = std::variant<wire::job_queued, wire::job_running, wire::job_tokens,
                               wire::job_restarted, wire::job_done, link_failure>;

// The job event a message carries, with its job_id; nullopt when the command is no job event (a
// reply), an error naming the command when its body does not decode.
std::optional<result<std::pair<uint64_t, job_event>>> decode_job_event(wire::command c,
                                                                       std::string_view body);

}  // namespace hearth::client
