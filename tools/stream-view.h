// Turns one job's event stream (job_queued, job_running, job_tokens, job_restarted, job_done)
// into the text a user sees, without sockets so that it can be tested alone.
//
// A job may run several attempts (its node died, or handed it back). Each attempt numbers its
// chunks from seq 0; stream_order keeps the newest attempt and the next expected seq, and drops
// chunks of older attempts and repeated chunks. When a new attempt starts after text has been
// shown, the new attempt usually reproduces it (the broker fixes the seed at submit), so the view
// prints only what goes beyond what is already on screen; if the new text differs, it says so on
// stderr and prints the new attempt from its start.
//
// A watcher that lost the broker re-attaches (watch with resume_point()): the broker then either
// continues the current attempt where the watcher left it, or sends it again from its start
// (seq 0); the first chunk after expect_resume() tells which, and a restart from seq 0 rebuilds
// the attempt's text, printing only what goes beyond the screen.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "schema/messages.h"

namespace hearth::cli {

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

class stream_view {
 public:
  using write_fn = std::function<void(std::string_view)>;

  // `out` gets the job's text, `err` notices. `terminal`: err is a terminal, so the queue
  // position, the node and a silence may be shown on a status line that the text then replaces.
  // `text_on_terminal`: out is that terminal too, so a notice or status line while the text is
  // mid-line starts a line of its own (a newline on err, the text's own bytes unchanged).
  stream_view(uint64_t job_id, write_fn out, write_fn err, bool terminal,
              bool text_on_terminal = true);

  void on_queued(const wire::job_queued& e);
  void on_running(const wire::job_running& e);
  void on_tokens(const wire::job_tokens& e);
  void on_restarted(const wire::job_restarted& e);
  void on_done(const wire::job_done& e);
  // Nothing came for `silent_ms` while the job's record says it is in `s`'s state (found by
  // asking the broker): on a terminal, a status line with the state, the node or the queue
  // position, and how long (a node that stopped sending is found out by the broker's heartbeats,
  // and its job requeued, within seconds).
  void on_silence(const wire::job_summary& s, int64_t silent_ms);
  // A line for err (ending in a newline) from outside the stream (the broker does not answer,
  // answers again): on a line of its own.
  void notice(std::string_view line);
  // Decodes an event body and passes it on; an error when it does not decode. Other commands
  // and other jobs' events are ignored.
  result<void> feed(wire::command cmd, std::string_view body);
  // The job ended without its job_done reaching us (found by asking the broker): `output` is
  // the job's whole output, shown like a restated attempt before the end is reported.
  void on_final(const wire::job_summary& s, const std::string& output);

  // What to re-attach with, and the re-attach made (expect_resume: see stream_order).
  stream_resume resume_point() const { return stream_resume_of(order_, current_); }
  void expect_resume() { order_.expect_resume(); }

  bool done() const { return final_.has_value(); }
  // 0 when the job completed, 1 when it failed or was cancelled (valid once done()).
  int exit_code() const;
  const std::optional<wire::job_done>& final_event() const { return final_; }
  // The current attempt's text as received, and the text shown since the last restart notice.
  const std::string& attempt_text() const { return current_; }
  const std::string& shown_text() const { return shown_; }

 private:
  void begin_attempt(uint32_t attempt, std::string reason);
  void append(std::string_view text);  // the current attempt's text grows
  void resync();                       // current_ changed as a whole
  void diverge();
  void print(std::string_view text);
  void status(const std::string& line);
  void clear_status();
  // On a shared terminal, while the text is mid-line: a newline on err, once, so that what err
  // says next starts a line of its own.
  void break_line();

  uint64_t job_id_;
  write_fn out_;
  write_fn err_;
  bool terminal_;
  bool text_on_terminal_;
  stream_order order_;
  std::string restart_reason_;  // why the current attempt started, when it is a restart
  bool restarted_ = false;      // the current attempt is not the first one seen
  // Invariant: current_ is a prefix of shown_. shown_ is what is on screen since the last
  // restart notice, which the current attempt is expected to reproduce.
  std::string current_;
  std::string shown_;
  bool at_line_start_ = true;  // the last character printed to `out` was a newline (or none)
  bool line_broken_ = false;   // since the text last went mid-line, err started a new line
  bool status_shown_ = false;
  std::optional<uint32_t> position_;  // the queue position last known
  std::string waiting_;               // the reason the job waits, as last shown
  std::string node_;                  // where the current attempt runs, from job_running
  int catch_up_shown_ = -1;  // the percentage of the screen's text a new attempt reproduced
  std::optional<wire::job_done> final_;
};

}  // namespace hearth::cli
