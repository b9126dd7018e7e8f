// One job's stream in order, without duplicates, across attempts, re-attaches and restatements:
// the one algorithm of the client library for it, used by both faces. Pure logic, no sockets.
// The blocking face's callers (the CLI's text view tools/stream-view.h and its JSON lines, the
// tests' client) judge chunks with accept(); the asynchronous face (broker-link.h) keeps one
// stream_order per follower and turns the broker's events into the follower's with feed().
//
// A job may run several attempts (its node died, or handed it back). Each attempt numbers its
// chunks from seq 0; the newest attempt is kept, chunks of older ones dropped.
//
// Within an attempt chunks are placed by byte, not only by token (PROTOCOL.md section 11): the
// broker's catch-up pages carry no token boundaries (every page but the last has n_tokens 0 at the
// same seq), so a repeated page can only be recognised by where its text falls in the attempt's
// output. Two points are kept apart: the `cursor`, the seq and byte where the broker's next chunk
// continues, and what was `given` (the most tokens and bytes of the attempt ever passed on), so
// that a restatement from seq 0 (a second watch on the connection, a re-attach the broker could not
// resume) gives only the bytes beyond what was given.
//
// A watcher that lost the broker re-attaches (watch with resume_point()): the broker then either
// continues the current attempt where the watcher left it, or sends it again from its start
// (seq 0); after expect_resume() the first chunk tells which (a seq 0 chunk is a rewind).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/protocol.h"
#include "schema/messages.h"

namespace hearth::client {

// What a job_tokens chunk is to the stream.
enum class chunk_verdict {
  append,       // the next text of the current attempt (also after a gap: it is all we get)
  restate,      // seq 0 reaching beyond what was given: the attempt's text from its start, as sent
                // when a watch begins on a running job
  rewind,       // after a re-attach, the current attempt sent again from seq 0: what follows
                // rebuilds the attempt from this chunk
  duplicate,    // nothing beyond what was given
  old_attempt,  // from an attempt that a newer one replaced
};
std::string_view chunk_verdict_name(chunk_verdict v);

// Where accept() put a chunk: its text is the attempt's output from byte `pos`, and from
// `fresh` on (text.size(): none of it) it is beyond every byte given before.
struct chunk_place {
  chunk_verdict verdict = chunk_verdict::duplicate;
  uint64_t pos = 0;
  size_t fresh = 0;
  bool kept() const {
    return verdict != chunk_verdict::duplicate && verdict != chunk_verdict::old_attempt;
  }
};

// A point in one attempt's stream, as a re-attaching watcher states it (the fields of wire::watch):
// tokens [0, seq) of `attempt`, which are output bytes [0, output_offset); attempt 0: nothing.
struct stream_resume {
  uint32_t attempt = 0;
  uint64_t seq = 0;
  uint64_t output_offset = 0;
  bool operator==(const stream_resume&) const = default;
};

class stream_order {
 public:
  // Makes `attempt` the current attempt when it is newer than the current one (true if so).
  bool begin_attempt(uint32_t attempt);
  // Places `c` and moves the cursor past it (not for an old attempt's chunk, nor for a repeat
  // whose place is unknown). A chunk of a newer attempt begins that attempt first.
  chunk_place accept(const wire::job_tokens& c);

  // A watch was sent saying the stream has `from` (resume_point(), or a mark shared by several
  // followers that is not beyond any): the broker's next chunk of the attempt at from.seq
  // continues from from.output_offset, or, at seq 0, sends the attempt again (rewind).
  void expect_resume(const stream_resume& from);
  void expect_resume() { expect_resume(resume_point()); }
  // What to re-attach with: where the broker's stream stands, never beyond what it sent. After a
  // gap the bytes are not the attempt's, so it asks for the attempt from its start.
  stream_resume resume_point() const;

  bool started() const { return attempt_ >= 0; }
  uint32_t attempt() const { return uint32_t(attempt_ < 0 ? 0 : attempt_); }
  uint64_t next_seq() const { return cursor_.seq; }
  uint64_t gaps() const { return gaps_; }  // chunks that skipped ahead (tokens never received)
  // The current attempt's tokens [0, next_seq()) all arrived (no gap since it began or was
  // restated).
  bool attempt_whole() const { return attempt_whole_; }

  // The follower's view (the asynchronous face, the CLI's JSON lines): appends to `out` what a
  // follower is to get for one event of its job: each attempt's text exactly once, in order, its
  // chunks numbered without gaps, a job_restarted before every new attempt, job_queued and
  // job_running not repeated once the attempt runs. A link_failure and job_done end the stream:
  // later events give nothing.
  void feed(const job_event& in, std::vector<job_event>& out);
  // The job ended without its job_done reaching the follower: the job's record, whose output is
  // its latest attempt's whole text. Appends what of it was not given, then the job_done it
  // stands for.
  void feed_final(const wire::job_summary& s, const std::string& output,
                  std::vector<job_event>& out);
  bool done() const { return done_; }

 private:
  struct point {
    uint64_t seq = 0;
    uint64_t byte = 0;
  };
  // begin_attempt, telling a follower (`out`) of a new attempt after an earlier one unless the
  // broker's own job_restarted (`announced`) is what makes it current.
  bool enter_attempt(uint64_t job_id, uint32_t attempt, bool announced,
                     std::vector<job_event>* out);
  // Puts `c`'s text at byte `pos` of the current attempt.
  chunk_place place(const wire::job_tokens& c, chunk_verdict v, uint64_t pos);
  // A follower's chunk for `c`, placed at `p`: its text beyond what was given, numbered on from
  // `from` (given_.seq before it); none when nothing is new.
  void give(const wire::job_tokens& c, const chunk_place& p, uint64_t from,
            std::vector<job_event>& out) const;

  int64_t attempt_ = -1;
  point cursor_;  // the broker's stream: where its next chunk of the attempt continues
  point given_;   // the most of the attempt passed on (tokens, bytes)
  uint64_t gaps_ = 0;
  bool attempt_whole_ = true;
  bool resuming_ = false;
  bool running_given_ = false;  // the follower got job_running of the current attempt
  bool done_ = false;
};

// The job_done a job's record stands for, when its own did not reach us.
wire::job_done job_done_of(const wire::job_summary& s, uint32_t attempt);

}  // namespace hearth::client
