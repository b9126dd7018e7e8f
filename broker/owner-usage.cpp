// What each owner's unfinished jobs hold (owner-usage.h).
#include "broker/owner-usage.h"

namespace hearth::broker {

uint64_t request_bytes(const std::string& prompt, const std::vector<wire::chat_message>& messages,
                       const wire::job_params& params) {
  uint64_t bytes = prompt.size();
  for (const auto& m : messages) {
    bytes += m.role.size() + m.content.size() + m.name.size() + m.tool_call_id.size() +
             m.reasoning_content.size();
    for (const auto& c : m.tool_calls) bytes += c.id.size() + c.name.size() + c.arguments.size();
  }
  const wire::api_params& a = params.api;
  bytes += a.tools.size() + a.tool_choice.size() + a.json_schema.size() + a.grammar.size() +
           a.template_kwargs.size() + 8 * a.logit_bias.size();
  return bytes;
}

void owner_usage::add(live_job& j) {
  j.queued_bytes = request_bytes(j.row.prompt, j.row.messages, j.row.params);
  auto& u = by_owner_[j.row.owner];
  ++u.jobs;
  u.bytes += j.queued_bytes;
  bytes_ += j.queued_bytes;
}

void owner_usage::release(const live_job& j) {
  auto it = by_owner_.find(j.row.owner);
  if (it == by_owner_.end()) return;
  --it->second.jobs;
  it->second.bytes -= j.queued_bytes;
  bytes_ -= j.queued_bytes;
  if (it->second.jobs == 0) by_owner_.erase(it);
}

void owner_usage::clear() {
  by_owner_.clear();
  bytes_ = 0;
}

client_usage owner_usage::of(const std::string& owner) const {
  const auto u = by_owner_.find(owner);
  return u == by_owner_.end() ? client_usage{} : u->second;
}

}  // namespace hearth::broker
