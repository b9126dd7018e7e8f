// Turns one job's event stream (job_queued, job_running, job_tokens, job_restarted, job_done)
// into the text a user sees, without sockets so that it can be tested alone.
//
// A job may run several attempts (its node died, or handed it back). Each attempt numbers its
// chunks from seq 0; stream_order (client/stream-order.h) keeps the newest attempt, drops chunks
// of older attempts and repeated chunks, and says where in the attempt's text each chunk goes.
// When a new attempt starts
// after text has been shown, the new attempt usually reproduces it (the broker fixes the seed at
// submit), so the view prints only what goes beyond what is already on screen; if the new text
// differs, it says so on stderr and prints the new attempt from its start.
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

#include "client/follow-job.h"
#include "client/stream-order.h"
#include "common/result.h"
#include "schema/messages.h"

namespace hearth::cli {

// The stream's order is the client library's (client/stream-order.h).
using client::chunk_place;
using client::chunk_verdict;
using client::chunk_verdict_name;
using client::job_done_of;
using client::stream_order;
using client::stream_resume;

// A client::job_stream, so that client::follow_job_events (client/follow-job.h) feeds it.
class stream_view : public client::job_stream {
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
  void on_silence(const wire::job_summary& s, int64_t silent_ms) override;
  // A line for err (ending in a newline) from outside the stream (the broker does not answer,
  // answers again): on a line of its own.
  void notice(std::string_view line) override;
  // Decodes an event body and passes it on; an error when it does not decode. Other commands
  // and other jobs' events are ignored.
  result<void> feed(wire::command cmd, std::string_view body) override;
  // The job ended without its job_done reaching us (found by asking the broker): `output` is
  // the job's whole output, shown like a restated attempt before the end is reported.
  void on_final(const wire::job_summary& s, const std::string& output) override;

  // What to re-attach with, and the re-attach made (expect_resume: see stream_order).
  stream_resume resume_point() const override { return order_.resume_point(); }
  void expect_resume() override { order_.expect_resume(); }

  // A renderer between the job's bytes and `out` (output events, tools/events-view.h): told
  // when the text is printed anew from an attempt's start and when the job ended (each time
  // instead of a newline: it ends its own line, as only it knows where its text is), and asked
  // whether what it printed ends a line, which the bytes it was given do not say.
  struct renderer_hooks {
    std::function<void()> restart;
    std::function<void()> finish;
    std::function<bool()> at_line_start;
  };
  void set_renderer(renderer_hooks r) { renderer_ = std::move(r); }

  bool done() const override { return final_.has_value(); }
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
  void show_beyond();  // prints what current_ has beyond shown_ (it is longer) and adds it there
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
  renderer_hooks renderer_;
};

}  // namespace hearth::cli
