#include "tools/follow-job.h"
#include "tools/interrupt.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "client/follow-job.h"
#include "client/protocol.h"
#include "tools/broker-cli.h"
#include "tools/events-view.h"
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

// JSON lines: the events as a follower gets them from client::stream_order (repeats after a
// re-attach and chunks of replaced attempts dropped, each attempt announced), so that the texts of
// one attempt's "tokens" events concatenate to its output; "restarted" says the text starts over.
// A client::job_stream, as stream_view is.
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
  stream_resume resume_point() const override { return order_.resume_point(); }
  void expect_resume() override { order_.expect_resume(); }

 private:
  void print(const std::vector<client::job_event>& events);

  uint64_t job_id_;
  stream_order order_;
  std::optional<int> exit_;
};

result<void> json_lines_stream::feed(wire::command cmd, std::string_view body) {
  if (done()) return {};
  auto ev = client::decode_job_event(cmd, body);
  if (!ev) return {};  // not a job event
  if (!*ev) return ev->err();
  if ((*ev)->first != job_id_) return {};
  std::vector<client::job_event> out;
  order_.feed((*ev)->second, out);
  print(out);
  return {};
}

void json_lines_stream::on_final(const wire::job_summary& s, const std::string& output) {
  if (done()) return;
  std::vector<client::job_event> out;
  order_.feed_final(s, output, out);
  print(out);
}

void json_lines_stream::print(const std::vector<client::job_event>& events) {
  for (const auto& e : events) {
    if (auto* q = std::get_if<wire::job_queued>(&e)) {
      print_json(event_json("queued", *q));
    } else if (auto* r = std::get_if<wire::job_running>(&e)) {
      print_json(event_json("running", *r));
    } else if (auto* t = std::get_if<wire::job_tokens>(&e)) {
      print_json(event_json("tokens", *t));
    } else if (auto* a = std::get_if<wire::job_restarted>(&e)) {
      print_json(event_json("restarted", *a));
    } else if (auto* d = std::get_if<wire::job_done>(&e)) {
      print_json(event_json("done", *d));
      exit_ = report_end(*d);
    }
  }
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
  events_printer printer(write_out, write_err, {.reasoning = o.show_reasoning});
  stream_view view(job_id,
                   o.output_events
                       ? stream_view::write_fn([&](std::string_view t) { printer.feed(t); })
                       : stream_view::write_fn(write_out),
                   write_err, isatty(STDERR_FILENO) != 0, isatty(STDOUT_FILENO) != 0);
  if (o.output_events) view.set_renderer(events_printer_hooks(printer, write_out));
  if (o.position) view.on_queued({job_id, *o.position, o.waiting});
  return follow(client, job_id, view, o);
}

}  // namespace hearth::cli
