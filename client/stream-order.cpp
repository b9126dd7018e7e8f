#include "client/stream-order.h"

#include <utility>

namespace hearth::client {

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
  if (int64_t(attempt) <= attempt_) return false;
  attempt_ = attempt;
  next_seq_ = 0;
  attempt_whole_ = true;
  resuming_ = false;  // a new attempt starts from seq 0 anyway
  return true;
}

chunk_verdict stream_order::accept(const wire::job_tokens& c) {
  if (int64_t(c.attempt) < attempt_) return chunk_verdict::old_attempt;
  begin_attempt(c.attempt);
  const uint64_t end = c.seq + c.n_tokens;
  if (std::exchange(resuming_, false) && c.seq == 0 && next_seq_ > 0) {
    next_seq_ = end;
    attempt_whole_ = true;
    return chunk_verdict::rewind;
  }
  if (c.seq >= next_seq_) {
    if (c.seq > next_seq_) {
      ++gaps_;
      attempt_whole_ = false;
    }
    next_seq_ = end;
    return chunk_verdict::append;
  }
  // A chunk that overlaps what we have can only be used when it starts at 0, where its text is
  // known to begin with the text we already have; other overlaps cannot be split by token.
  if (c.seq == 0 && end > next_seq_) {
    next_seq_ = end;
    return chunk_verdict::restate;
  }
  return chunk_verdict::duplicate;
}

stream_resume stream_resume_of(const stream_order& order, const std::string& text) {
  if (!order.started()) return {};
  if (!order.attempt_whole()) return {order.attempt(), 0, 0};
  return {order.attempt(), order.next_seq(), text.size()};
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
