// One job's stream in order, without duplicates, across attempts and re-attaches: which chunk
// of job_tokens to use and where a re-attaching watcher stands (the fields of wire::watch). Pure
// logic, no sockets; the CLI's views (tools/stream-view.h, JSON lines) and the tests' client
// number their text with it.
//
// A job may run several attempts (its node died, or handed it back). Each attempt numbers its
// chunks from seq 0; stream_order keeps the newest attempt and the next expected seq, and drops
// chunks of older attempts and repeated chunks.
//
// A watcher that lost the broker re-attaches (watch with stream_resume_of()): the broker then
// either continues the current attempt where the watcher left it, or sends it again from its
// start (seq 0); the first chunk after expect_resume() tells which.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "schema/messages.h"

namespace hearth::client {

// What to do with a job_tokens chunk.
enum class chunk_verdict {
  append,       // the next text of the current attempt (also after a gap: it is all we get)
  restate,      // seq 0 and longer than what we have: the attempt's text from its start, as sent
                // when a watch begins on a running job
  rewind,       // after a re-attach, the current attempt sent again from seq 0: what we have of
                // it is replaced by this chunk and what follows
  duplicate,    // seen already
  old_attempt,  // from an attempt that a newer one replaced
};
std::string_view chunk_verdict_name(chunk_verdict v);

class stream_order {
 public:
  // Makes `attempt` the current attempt when it is newer than the current one (true if so).
  bool begin_attempt(uint32_t attempt);
  // Judges `c` and, unless dropped, moves the expected seq past it. A chunk of a newer attempt
  // begins that attempt first.
  chunk_verdict accept(const wire::job_tokens& c);
  // After a re-attach: the next chunk of the current attempt either continues from next_seq()
  // or, with seq 0, starts the attempt again (rewind).
  void expect_resume() { resuming_ = true; }
  bool started() const { return attempt_ >= 0; }
  uint32_t attempt() const { return uint32_t(attempt_ < 0 ? 0 : attempt_); }
  uint64_t next_seq() const { return next_seq_; }
  uint64_t gaps() const { return gaps_; }  // chunks that skipped ahead (tokens never received)
  // The current attempt's tokens [0, next_seq()) all arrived (no gap since it began).
  bool attempt_whole() const { return attempt_whole_; }

 private:
  int64_t attempt_ = -1;
  uint64_t next_seq_ = 0;
  uint64_t gaps_ = 0;
  bool attempt_whole_ = true;
  bool resuming_ = false;
};

// What a re-attaching watcher says it has (the fields of wire::watch): tokens [0, seq) of
// `attempt`, which are output bytes [0, output_offset); attempt 0: nothing.
struct stream_resume {
  uint32_t attempt = 0;
  uint64_t seq = 0;
  uint64_t output_offset = 0;
};

// The resume point of an attempt of which `order` and `text` (its text as received) tell: after a
// gap the text is not the attempt's prefix, so it asks for the attempt from its start.
stream_resume stream_resume_of(const stream_order& order, const std::string& text);

// The job_done a job's record stands for, when its own did not reach us.
wire::job_done job_done_of(const wire::job_summary& s, uint32_t attempt);

}  // namespace hearth::client
