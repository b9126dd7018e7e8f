#include "client/follow-stream.h"

#include <algorithm>
#include <string>

namespace hearth::client {
namespace {

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};

}  // namespace

void follow_stream::feed(const job_event& in, std::vector<job_event>& out) {
  if (done_) return;
  std::visit(overloaded{
                 [&](const wire::job_queued& q) {
                   // A position means nothing once the attempt runs (a repeat after a re-attach).
                   if (!running_given_) out.push_back(q);
                 },
                 [&](const wire::job_running& r) {
                   if (r.attempt < given_.attempt) return;
                   if (r.attempt == given_.attempt && running_given_)
                     return;  // said again on re-attach
                   begin_attempt(r.attempt, out, false);
                   running_given_ = true;
                   out.push_back(r);
                 },
                 [&](const wire::job_restarted& r) {
                   if (r.attempt <= given_.attempt) return;
                   begin_attempt(r.attempt, out, true);
                   out.push_back(r);
                 },
                 [&](const wire::job_tokens& t) { feed_tokens(t, out); },
                 [&](const wire::job_done& d) {
                   done_ = true;
                   out.push_back(d);
                 },
                 [&](const link_failure& f) {
                   done_ = true;
                   out.push_back(f);
                 },
             },
             in);
}

bool follow_stream::begin_attempt(uint32_t attempt, std::vector<job_event>& out, bool announced) {
  if (attempt <= given_.attempt) return false;
  if (given_.attempt > 0 && !announced) {
    // Its job_restarted came while the link re-attached: the follower must still learn that the
    // text starts over.
    out.push_back(
        wire::job_restarted{job_id_, attempt, "attempt " + std::to_string(attempt) + " began"});
  }
  given_ = {attempt, 0, 0};
  cursor_ = given_;
  running_given_ = false;
  return true;
}

void follow_stream::feed_tokens(const wire::job_tokens& t, std::vector<job_event>& out) {
  if (t.attempt < given_.attempt) return;
  begin_attempt(t.attempt, out, false);
  // Where the chunk's text starts in the attempt's output.
  uint64_t pos = 0;
  if (t.seq == cursor_.seq) {
    pos = cursor_.byte;  // the stream continuing (live, or a catch-up from our mark)
  } else if (t.seq == 0) {
    pos = 0;  // the attempt restated from its start (a second watch, a re-attach the broker
              // could not resume)
  } else if (t.seq > cursor_.seq) {
    pos = given_.byte;  // tokens were lost: continue after what was given, as the CLI does
  } else {
    return;  // inside what was had, at a place no byte offset is known for: a repeat
  }
  const uint64_t end = pos + t.text.size();
  // Invariant: cursor_.byte <= given_.byte, so pos <= given_.byte.
  std::string fresh = end > given_.byte ? t.text.substr(given_.byte - pos) : std::string();
  cursor_ = {given_.attempt, t.seq + t.n_tokens, end};
  const uint64_t seq = std::max(given_.seq, cursor_.seq);
  if (fresh.empty() && seq == given_.seq) return;
  out.push_back(wire::job_tokens{job_id_, given_.attempt, given_.seq, uint32_t(seq - given_.seq),
                                 std::move(fresh)});
  given_.seq = seq;
  given_.byte = std::max(given_.byte, end);
}

void follow_stream::resume_from(const stream_mark& m) {
  if (m.attempt != 0 && m.attempt != given_.attempt) return;
  cursor_ = {given_.attempt, m.seq, m.byte};
}

}  // namespace hearth::client
