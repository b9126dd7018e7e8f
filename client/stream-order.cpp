#include "client/stream-order.h"

#include <algorithm>
#include <utility>

namespace hearth::client {
namespace {

template <class... F>
struct stream_order_visitor : F... {
  using F::operator()...;
};

}  // namespace

std::string_view chunk_verdict_name(chunk_verdict v) {
  switch (v) {
    case chunk_verdict::append:
      return "append";
    case chunk_verdict::restate:
      return "restate";
    case chunk_verdict::rewind:
      return "rewind";
    case chunk_verdict::duplicate:
      return "duplicate";
    case chunk_verdict::old_attempt:
      return "old_attempt";
  }
  return "unknown";
}

bool stream_order::begin_attempt(uint32_t attempt) {
  return enter_attempt(0, attempt, true, nullptr);
}

bool stream_order::enter_attempt(uint64_t job_id, uint32_t attempt, bool announced,
                                 std::vector<job_event>* out) {
  if (int64_t(attempt) <= attempt_) return false;
  if (out && started() && !announced) {
    // Its job_restarted came while the follower re-attached (or never: the record told the end):
    // the follower must still learn that the text starts over.
    out->push_back(
        wire::job_restarted{job_id, attempt, "attempt " + std::to_string(attempt) + " began"});
  }
  attempt_ = attempt;
  cursor_ = {};
  given_ = {};
  attempt_whole_ = true;
  resuming_ = false;  // a new attempt starts from seq 0 anyway
  running_given_ = false;
  return true;
}

chunk_place stream_order::accept(const wire::job_tokens& c) {
  const chunk_place repeat{chunk_verdict::duplicate, 0, c.text.size()};
  if (int64_t(c.attempt) < attempt_) return {chunk_verdict::old_attempt, 0, c.text.size()};
  begin_attempt(c.attempt);
  const bool resuming = std::exchange(resuming_, false);
  if (c.seq == cursor_.seq) {
    return place(c, chunk_verdict::append, cursor_.byte);  // live, or a page of a catch-up
  }
  if (c.seq == 0) {
    if (resuming) return place(c, chunk_verdict::rewind, 0);
    // A whole chunk at 0 that ends within what the stream has is a repeat. A page of n_tokens 0
    // may begin a restatement of the attempt (a second watch on this connection): the pages that
    // follow continue from where it ends.
    if (c.n_tokens > 0 && c.seq + c.n_tokens <= cursor_.seq && c.text.size() <= cursor_.byte) {
      return repeat;
    }
    return place(c, chunk_verdict::restate, 0);
  }
  if (c.seq > cursor_.seq) {
    // Tokens were lost: what comes is all we get, after what the stream has.
    ++gaps_;
    attempt_whole_ = false;
    return place(c, chunk_verdict::append, cursor_.byte);
  }
  return repeat;  // inside what the stream has, at a place no byte offset is known for
}

chunk_place stream_order::place(const wire::job_tokens& c, chunk_verdict v, uint64_t pos) {
  const uint64_t end_seq = c.seq + c.n_tokens;
  const uint64_t end_byte = pos + c.text.size();
  // pos <= given_.byte (the cursor is never beyond what was given), so this is the overlap.
  const size_t fresh =
      given_.byte > pos ? size_t(std::min<uint64_t>(given_.byte - pos, c.text.size())) : 0;
  const bool nothing_new = fresh == c.text.size() && end_seq <= given_.seq;
  if (pos == 0 && c.seq == 0) attempt_whole_ = true;  // the attempt from its start
  cursor_ = {end_seq, end_byte};
  given_ = {std::max(given_.seq, end_seq), std::max(given_.byte, end_byte)};
  if (v == chunk_verdict::restate && nothing_new) v = chunk_verdict::duplicate;
  return {v, pos, fresh};
}

void stream_order::expect_resume(const stream_resume& from) {
  if (!started() || (from.attempt != 0 && from.attempt != attempt())) return;
  cursor_ = {from.seq, from.output_offset};
  resuming_ = true;
}

stream_resume stream_order::resume_point() const {
  if (!started()) return {};
  if (!attempt_whole_) return {attempt(), 0, 0};
  return {attempt(), cursor_.seq, cursor_.byte};
}

void stream_order::give(const wire::job_tokens& c, const chunk_place& p, uint64_t from,
                        std::vector<job_event>& out) const {
  if (p.fresh >= c.text.size() && given_.seq == from) return;
  out.push_back(wire::job_tokens{c.job_id, attempt(), from, uint32_t(given_.seq - from),
                                 c.text.substr(std::min(p.fresh, c.text.size()))});
}

void stream_order::feed(const job_event& in, std::vector<job_event>& out) {
  if (done_) return;
  std::visit(stream_order_visitor{
                 [&](const wire::job_queued& q) {
                   // A position means nothing once the attempt runs (a repeat after a re-attach).
                   if (!running_given_) out.push_back(q);
                 },
                 [&](const wire::job_running& r) {
                   if (int64_t(r.attempt) < attempt_) return;
                   if (int64_t(r.attempt) == attempt_ && running_given_) return;  // said again
                   enter_attempt(r.job_id, r.attempt, false, &out);
                   running_given_ = true;
                   out.push_back(r);
                 },
                 [&](const wire::job_restarted& r) {
                   if (int64_t(r.attempt) <= attempt_) return;
                   enter_attempt(r.job_id, r.attempt, true, &out);
                   out.push_back(r);
                 },
                 [&](const wire::job_tokens& t) {
                   if (int64_t(t.attempt) < attempt_) return;
                   enter_attempt(t.job_id, t.attempt, false, &out);
                   const uint64_t from = given_.seq;
                   give(t, accept(t), from, out);
                 },
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

void stream_order::feed_final(const wire::job_summary& s, const std::string& output,
                              std::vector<job_event>& out) {
  if (done_) return;
  enter_attempt(s.job_id, s.attempts, false, &out);
  // The record's output is the whole attempt: a restatement of it.
  const wire::job_tokens whole{s.job_id, attempt(), 0, s.n_gen, output};
  const uint64_t from = given_.seq;
  give(whole, place(whole, chunk_verdict::restate, 0), from, out);
  done_ = true;
  out.push_back(job_done_of(s, attempt()));
}

wire::job_done job_done_of(const wire::job_summary& s, uint32_t attempt) {
  wire::job_done d;
  d.job_id = s.job_id;
  d.attempt = attempt;
  d.state = s.state;
  d.stop_reason = s.stop_reason;
  d.error = s.error;
  d.n_prompt = s.n_prompt;
  d.n_gen = s.n_gen;
  return d;
}

}  // namespace hearth::client
