#include "tools/stream-view.h"

#include <algorithm>
#include <utility>

#include "schema/codec.h"

namespace hearth::cli {

stream_view::stream_view(uint64_t job_id, write_fn out, write_fn err, bool terminal,
                         bool text_on_terminal)
    : job_id_(job_id),
      out_(std::move(out)),
      err_(std::move(err)),
      terminal_(terminal),
      text_on_terminal_(terminal && text_on_terminal) {}

void stream_view::on_queued(const wire::job_queued& e) {
  if (e.job_id != job_id_ || done()) return;
  // Why it waits (no online node serves its model ...), on a line of its own, once per change:
  // a status line would hide it, and a job that will not run soon must say so.
  if (e.waiting != waiting_) {
    waiting_ = e.waiting;
    if (!waiting_.empty())
      notice("hearth: job " + std::to_string(job_id_) + ": " + waiting_ + "\n");
  }
  position_ = e.position;
  // On the wire, position counts the jobs ahead; people count from 1.
  status("queued: position " + std::to_string(uint64_t(e.position) + 1));
}

void stream_view::on_silence(const wire::job_summary& s, int64_t silent_ms) {
  if (s.job_id != job_id_ || done()) return;
  const std::string secs = std::to_string(silent_ms / 1000) + " s";
  if (s.state == wire::job_state::queued) {
    status("queued" + (position_ ? ": position " + std::to_string(uint64_t(*position_) + 1) : "") +
           " (" + secs + ")");
  } else if (s.state == wire::job_state::running) {
    // Short: a status line that wraps on a narrow terminal cannot be cleared with "\r".
    status("running on " + s.node + ", no tokens for " + secs);
  }
}

void stream_view::notice(std::string_view line) {
  clear_status();
  break_line();
  err_(line);
}

void stream_view::on_running(const wire::job_running& e) {
  if (e.job_id != job_id_ || done()) return;
  begin_attempt(e.attempt, "");
  if (e.attempt == order_.attempt()) node_ = e.node;
  if (e.attempt == order_.attempt() && current_.empty()) status("running on " + e.node);
}

void stream_view::on_tokens(const wire::job_tokens& e) {
  if (e.job_id != job_id_ || done()) return;
  begin_attempt(e.attempt, "");
  const chunk_place p = order_.accept(e);
  if (!p.kept()) return;
  // The attempt's text with the chunk in its place: one from before its end (a restatement, the
  // attempt sent again after a re-attach) replaces what followed there.
  std::string text = current_.substr(0, std::min<uint64_t>(p.pos, current_.size())) + e.text;
  if (text.starts_with(current_)) {
    append(std::string_view(text).substr(current_.size()));
  } else {
    current_ = std::move(text);
    resync();
  }
}

void stream_view::on_restarted(const wire::job_restarted& e) {
  if (e.job_id != job_id_ || done()) return;
  const bool newer = !order_.started() || e.attempt > order_.attempt();
  begin_attempt(e.attempt, e.reason);
  // On a terminal the pause that follows (queued again, the next node loading) is explained; the
  // text then goes on where it was when the new attempt reproduces it (diverge() if not).
  if (newer && terminal_) {
    notice("hearth: job " + std::to_string(job_id_) + " starts again (" + e.reason +
           "); the text goes on once the new attempt passes it\n");
  }
}

void stream_view::on_done(const wire::job_done& e) {
  if (e.job_id != job_id_ || done()) return;
  clear_status();
  // The last attempt ended short of what an earlier one showed: the screen says more than the
  // job's output, so the reader must be told, as for any other difference.
  if (e.state == wire::job_state::completed && e.attempt == order_.attempt() &&
      current_.size() < shown_.size()) {
    diverge();
  }
  if (renderer_.finish) {
    clear_status();
    renderer_.finish();
    at_line_start_ = true;
  } else if (!at_line_start_) {
    print("\n");
  }
  final_ = e;
  const std::string job = "job " + std::to_string(job_id_);
  switch (e.state) {
    case wire::job_state::completed:
      if (terminal_) {
        err_("[" + job + ": prompt " + std::to_string(e.n_prompt) + " tokens | generated " +
             std::to_string(e.n_gen) + " tokens | " + e.stop_reason + "]\n");
      }
      break;
    case wire::job_state::failed:
      err_("hearth: error: " + job + " failed: " + e.error + "\n");
      break;
    case wire::job_state::cancelled:
      err_("hearth: " + job + " was cancelled\n");
      break;
    default:
      err_("hearth: error: " + job + " ended in state " +
           std::string(wire::job_state_name(e.state)) + "\n");
      break;
  }
}

void stream_view::on_final(const wire::job_summary& s, const std::string& output) {
  if (s.job_id != job_id_ || done()) return;
  if (std::string_view(output).starts_with(current_)) {
    append(std::string_view(output).substr(current_.size()));
  } else {
    current_ = output;
    resync();
  }
  on_done(job_done_of(s, order_.attempt()));
}

namespace {
template <class M, class F>
result<void> decode_to(std::string_view body, F&& handle) {
  auto m = wire::decode<M>(body);
  if (!m) return error{std::string(wire::command_name(M::cmd)) + ": " + m.message()};
  handle(*m);
  return {};
}
}  // namespace

result<void> stream_view::feed(wire::command cmd, std::string_view body) {
  switch (cmd) {
    case wire::command::job_queued:
      return decode_to<wire::job_queued>(body, [&](auto& m) { on_queued(m); });
    case wire::command::job_running:
      return decode_to<wire::job_running>(body, [&](auto& m) { on_running(m); });
    case wire::command::job_tokens:
      return decode_to<wire::job_tokens>(body, [&](auto& m) { on_tokens(m); });
    case wire::command::job_restarted:
      return decode_to<wire::job_restarted>(body, [&](auto& m) { on_restarted(m); });
    case wire::command::job_done:
      return decode_to<wire::job_done>(body, [&](auto& m) { on_done(m); });
    default:
      return {};
  }
}

int stream_view::exit_code() const {
  return final_ && final_->state == wire::job_state::completed ? 0 : 1;
}

void stream_view::begin_attempt(uint32_t attempt, std::string reason) {
  const bool had_one = order_.started();
  if (!order_.begin_attempt(attempt)) {
    // job_restarted after the new attempt's first chunk: keep the reason for the notice.
    if (attempt == order_.attempt() && !reason.empty()) restart_reason_ = std::move(reason);
    return;
  }
  restarted_ = restarted_ || had_one;
  restart_reason_ = std::move(reason);
  current_.clear();
  catch_up_shown_ = -1;
}

void stream_view::append(std::string_view text) {
  const size_t start = current_.size();
  current_ += text;
  if (start < shown_.size()) {
    const size_t n = std::min(text.size(), shown_.size() - start);
    if (std::string_view(shown_).substr(start, n) != text.substr(0, n)) {
      diverge();
      return;
    }
  }
  if (current_.size() > shown_.size()) {
    show_beyond();
  } else if (restarted_) {
    // A new attempt reproducing what is on screen: nothing to print for a while, so say how far.
    const int pct = int(current_.size() * 100 / std::max<size_t>(shown_.size(), 1));
    if (catch_up_shown_ < 0 || pct / 10 != catch_up_shown_ / 10) {
      catch_up_shown_ = pct;
      status("attempt " + std::to_string(order_.attempt()) + (node_.empty() ? "" : " on " + node_) +
             ": " + std::to_string(pct) + "% of the text so far made again");
    }
  }
}

void stream_view::resync() {
  const size_t n = std::min(current_.size(), shown_.size());
  if (std::string_view(shown_).substr(0, n) != std::string_view(current_).substr(0, n)) {
    diverge();
    return;
  }
  if (current_.size() > shown_.size()) {
    show_beyond();
  }
}

void stream_view::show_beyond() {
  const std::string_view extra = std::string_view(current_).substr(shown_.size());
  shown_ += extra;
  print(extra);
}

void stream_view::diverge() {
  clear_status();
  if (renderer_.restart) {
    renderer_.restart();  // it ends its own line
    at_line_start_ = true;
  } else if (!at_line_start_) {
    print("\n");
  }
  const std::string reason =
      restart_reason_.empty() ? "attempt " + std::to_string(order_.attempt()) : restart_reason_;
  err_("[hearth: job " + std::to_string(job_id_) + " restarted on another node (" + reason +
       "); output from here is the new attempt]\n");
  shown_ = current_;
  print(current_);
}

void stream_view::print(std::string_view text) {
  if (text.empty()) return;
  clear_status();
  out_(text);
  at_line_start_ = renderer_.at_line_start ? renderer_.at_line_start() : text.back() == '\n';
  line_broken_ = false;
}

void stream_view::status(const std::string& line) {
  if (!terminal_) return;
  // Only on a line of its own: "\r" would otherwise overwrite text the job already printed.
  break_line();
  err_("\r" + line + "\x1b[K");
  status_shown_ = true;
}

void stream_view::break_line() {
  if (!text_on_terminal_ || at_line_start_ || line_broken_) return;
  err_("\n");
  line_broken_ = true;
}

void stream_view::clear_status() {
  if (!status_shown_) return;
  err_("\r\x1b[K");
  status_shown_ = false;
}

}  // namespace hearth::cli
