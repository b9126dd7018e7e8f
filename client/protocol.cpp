#include "client/protocol.h"

namespace hearth::client {
namespace {

template <class M>
result<std::pair<uint64_t, job_event>> decode_event(std::string_view body) {
  auto m = wire::decode<M>(body);
  if (!m) return error{std::string(wire::command_name(M::cmd)) + ": " + m.message()};
  const uint64_t id = m->job_id;
  return std::pair<uint64_t, job_event>{id, std::move(m).value()};
}

}  // namespace

bool is_job_event(wire::command c) {
  switch (c) {
    case wire::command::job_queued:
    case wire::command::job_running:
    case wire::command::job_tokens:
    case wire::command::job_restarted:
    case wire::command::job_done:
      return true;
    default:
      return false;
  }
}

result<uint64_t> reply_request_id(std::string_view body) {
  auto r = wire::decode<wire::ok>(body);
  if (!r) return r.err();
  return r->request_id;
}

std::optional<result<std::pair<uint64_t, job_event>>> decode_job_event(wire::command c,
                                                                       std::string_view body) {
  switch (c) {
    case wire::command::job_queued:
      return decode_event<wire::job_queued>(body);
    case wire::command::job_running:
      return decode_event<wire::job_running>(body);
    case wire::command::job_tokens:
      return decode_event<wire::job_tokens>(body);
    case wire::command::job_restarted:
      return decode_event<wire::job_restarted>(body);
    case wire::command::job_done:
      return decode_event<wire::job_done>(body);
    default:
      return std::nullopt;
  }
}

}  // namespace hearth::client
