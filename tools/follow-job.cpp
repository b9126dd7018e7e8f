#include "tools/follow-job.h"
#include "tools/interrupt.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "client/follow-job.h"
#include "tools/broker-cli.h"
#include "tools/stream-view.h"

namespace hearth::cli {
namespace {

int report_end(const wire::job_done& d) {
  const std::string job = "job " + std::to_string(d.job_id);
  if (d.state == wire::job_state::completed) return 0;
  if (d.state == wire::job_state::cancelled) {
    write_err("hearth: " + job + " was cancelled\n");
  } else {
    write_err("hearth: error: " + job + " failed: " + d.error + "\n");
  }
  return 1;
}

// JSON lines: the events as they come, minus duplicates and chunks of replaced attempts, so
// that the texts of one attempt's "tokens" events concatenate to its output; "restarted" says
// the text starts over. A client::job_stream, as stream_view is.
class json_lines_stream : public client::job_stream {
 public:
  explicit json_lines_stream(uint64_t job_id) : job_id_(job_id) {}

  result<void> feed(wire::command cmd, std::string_view body) override;
  void on_final(const wire::job_summary& s, const std::string& output) override;
  // JSON lines tell only the broker's events; notices go to stderr as they are.
  void on_silence(const wire::job_summary&, int64_t) override {}
  void notice(std::string_view line) override { write_err(line); }
  bool done() const override { return exit_.has_value(); }
  int exit_code() const { return exit_.value_or(1); }
  stream_resume resume_point() const override { return stream_resume_of(order_, received_); }
  void expect_resume() override { order_.expect_resume(); }

 private:
  // Makes `attempt` current when it is newer. A new attempt after an earlier one whose
  // job_restarted we did not get (it came while we were re-attaching) is announced here, so that
  // "restarted" still tells that the text starts over. Returns whether it was newer.
  bool begin(uint32_t attempt, bool announced = false) {
    const bool had_one = order_.started();
    if (!order_.begin_attempt(attempt)) return false;
    received_.clear();
    printed_.clear();
    printed_seq_ = 0;
    if (had_one && !announced) {
      print_json(event_json(
          "restarted",
          wire::job_restarted{job_id_, attempt, "attempt " + std::to_string(attempt) + " began"}));
    }
    return true;
  }
  void on_tokens(wire::job_tokens e);
  // Prints what received_ holds beyond printed_, as a "tokens" event like `e`.
  void print_beyond(wire::job_tokens e);
  void finish(const wire::job_done& d) {
    print_json(event_json("done", d));
    exit_ = report_end(d);
  }

  uint64_t job_id_;
  stream_order order_;
  std::string received_;  // the current attempt's text as received (rebuilt after a rewind)
  std::string printed_;   // the texts of its "tokens" events so far: a prefix of received_
  uint64_t printed_seq_ = 0;
  std::optional<int> exit_;
};

template <class M>
result<M> decode_body(std::string_view body) {
  auto m = wire::decode<M>(body);
  if (!m) return error{std::string(wire::command_name(M::cmd)) + ": " + m.message()};
  return m;
}

result<void> json_lines_stream::feed(wire::command cmd, std::string_view body) {
  if (done()) return {};
  switch (cmd) {
    case wire::command::job_queued: {
      auto e = decode_body<wire::job_queued>(body);
      if (!e) return e.err();
      if (e->job_id == job_id_) print_json(event_json("queued", *e));
      return {};
    }
    case wire::command::job_running: {
      auto e = decode_body<wire::job_running>(body);
      if (!e) return e.err();
      if (e->job_id != job_id_ || (order_.started() && e->attempt < order_.attempt())) return {};
      begin(e->attempt);
      print_json(event_json("running", *e));
      return {};
    }
    case wire::command::job_tokens: {
      auto e = decode_body<wire::job_tokens>(body);
      if (!e) return e.err();
      if (e->job_id == job_id_) on_tokens(std::move(e).value());
      return {};
    }
    case wire::command::job_restarted: {
      auto e = decode_body<wire::job_restarted>(body);
      if (!e) return e.err();
      if (e->job_id != job_id_ || (order_.started() && e->attempt <= order_.attempt())) return {};
      begin(e->attempt, true);
      print_json(event_json("restarted", *e));
      return {};
    }
    case wire::command::job_done: {
      auto e = decode_body<wire::job_done>(body);
      if (!e) return e.err();
      if (e->job_id == job_id_) finish(*e);
      return {};
    }
    default:
      return {};
  }
}

void json_lines_stream::on_tokens(wire::job_tokens e) {
  if (!order_.started() || e.attempt > order_.attempt()) begin(e.attempt);
  switch (order_.accept(e)) {
    case chunk_verdict::append:
      received_ += e.text;
      break;
    case chunk_verdict::restate:
    case chunk_verdict::rewind:
      // The attempt's text from its start: what was printed of it is its prefix.
      received_ = e.text;
      break;
    case chunk_verdict::duplicate:
    case chunk_verdict::old_attempt:
      return;
  }
  print_beyond(std::move(e));
}

void json_lines_stream::print_beyond(wire::job_tokens e) {
  if (!std::string_view(received_).starts_with(printed_)) {
    if (received_.size() < printed_.size() && std::string_view(printed_).starts_with(received_)) {
      return;  // a rewind still rebuilding what was printed
    }
    // The same attempt told differently: never expected, but said rather than mixed.
    wire::job_restarted r{job_id_, order_.attempt(),
                          "the attempt's text was sent again differently"};
    print_json(event_json("restarted", r));
    printed_.clear();
    printed_seq_ = 0;
  }
  if (received_.size() <= printed_.size()) return;
  const std::string_view extra = std::string_view(received_).substr(printed_.size());
  if (extra != e.text) {
    // Only the part beyond what was printed, so that texts still concatenate.
    e.text = std::string(extra);
    e.seq = printed_seq_;
    e.n_tokens = uint32_t(order_.next_seq() > printed_seq_ ? order_.next_seq() - printed_seq_ : 0);
  }
  printed_seq_ = std::max(printed_seq_, e.seq + e.n_tokens);
  printed_ = received_;
  print_json(event_json("tokens", e));
}

void json_lines_stream::on_final(const wire::job_summary& s, const std::string& output) {
  if (done()) return;
  const wire::job_done d = job_done_of(s, order_.attempt());
  if (output.size() > printed_.size() && std::string_view(output).starts_with(printed_)) {
    received_ = output;
    print_beyond(wire::job_tokens{job_id_, d.attempt, printed_seq_,
                                  uint32_t(d.n_gen > printed_seq_ ? d.n_gen - printed_seq_ : 0),
                                  ""});
  }
  finish(d);
}

// Ctrl-C: the job is cancelled, or left running with --detach.
int interrupt(broker_client& client, uint64_t job_id, const follow_options& o) {
  const auto id = std::to_string(job_id);
  if (!o.cancel_on_interrupt) {
    write_err("\nhearth: job " + id + " keeps running (hearth watch " + id + ", hearth cancel " +
              id + ")\n");
    return 130;
  }
  wire::cancel c;
  c.job_id = job_id;
  try {
    client.request<wire::ok>(c);
    write_err("\nhearth: job " + id + " cancelled\n");
  } catch (const broker_error& e) {
    // It ended meanwhile (already_final), or the broker refuses: say so, the exit code stays.
    write_err("\nhearth: job " + id + " was not cancelled: " + e.what() + "\n");
  } catch (const broker_timeout&) {
    write_err("\nhearth: job " + id +
              " may still run: the broker did not answer the cancel (hearth cancel " + id + ")\n");
  }
  return 130;
}

// Follows the job into `s` (client/follow-job.h); Ctrl-C ends it through interrupt().
template <class Stream>
int follow(broker_client& client, uint64_t job_id, Stream& s, const follow_options& o) {
  client::job_follow_options f;
  f.attach = o.attach;
  f.retry_for = o.retry_for;
  f.retry_for_given = o.retry_for_given;
  f.stop = interrupted;
  if (client::follow_job_events(client, job_id, s, f) == client::follow_end::stopped) {
    return interrupt(client, job_id, o);
  }
  return s.exit_code();
}

}  // namespace

int follow_job(broker_client& client, uint64_t job_id, const follow_options& o) {
  if (o.json_lines) {
    json_lines_stream s(job_id);
    return follow(client, job_id, s, o);
  }
  stream_view view(job_id, write_out, write_err, isatty(STDERR_FILENO) != 0,
                   isatty(STDOUT_FILENO) != 0);
  if (o.position) view.on_queued({job_id, *o.position, o.waiting});
  return follow(client, job_id, view, o);
}

}  // namespace hearth::cli
