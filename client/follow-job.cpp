#include "client/follow-job.h"

#include <stdexcept>
#include <string>

#include "client/broker-retry.h"
#include "client/job-record.h"
#include "client/reconnect-policy.h"

namespace hearth::client {
namespace {

// A silence this long is told (job_stream::on_silence; on a terminal, the CLI's status line): the
// pause of a failover (the broker notices a lost node by its missed heartbeats) or a long wait in
// the queue. Longer than a slow model's time between tokens, so that its text is not broken up
// by notices.
constexpr std::chrono::seconds silence_notice{6};

// The job's record: whole (its output too) when it has ended, else the first page's summary.
// Throws broker_timeout when the broker does not answer.
wire::job_detail job_now(broker_client& client, uint64_t job_id) {
  wire::get_job g;
  g.job_id = job_id;
  // The first page tells whether it ended; only then is the whole output worth reading.
  auto r = client.request<wire::job_reply>(g);
  if (!wire::job_state_is_final(r.job.summary.state)) return std::move(r.job);
  return fetch_job(client, job_id);
}

// A job event's kind, or throws on an error from the broker.
wire::command event_command(const net::received& ev, const std::string& endpoint) {
  const auto views = ev.views();
  const auto cmd = wire::command(uint8_t(views[1][0]));
  if (cmd == wire::command::error) {
    auto e = wire::decode<wire::error_reply>(views[2]);
    throw std::runtime_error(e ? e->message : "malformed error from the broker at " + endpoint);
  }
  return cmd;
}

// Watches the job again on a fresh socket, saying what the stream has, until the broker answers
// or retry_for has passed. `lost`: the broker is known to be gone, so say at once that we wait.
void attach(broker_client& client, uint64_t job_id, job_stream& s, const job_follow_options& o,
            bool lost) {
  broker_retry retry(
      client, o.retry_for, [&s](std::string_view l) { s.notice(l); }, o.retry_for_given);
  if (lost) retry.announce();
  retry.run([&](int n) {
    if (lost || n > 0) client.reconnect();
    const stream_resume p = s.resume_point();
    wire::watch w;
    w.job_id = job_id;
    w.attempt = p.attempt;
    w.seq = p.seq;
    w.output_offset = p.output_offset;
    client.request<wire::ok>(w);
  });
  s.expect_resume();
}

}  // namespace

follow_end follow_job_events(broker_client& client, uint64_t job_id, job_stream& s,
                             const job_follow_options& o) {
  const auto stopped = [&] { return o.stop && o.stop(); };
  if (o.attach) attach(client, job_id, s, o, false);
  auto last_event = std::chrono::steady_clock::now();
  while (!s.done()) {
    if (stopped()) return follow_end::stopped;
    if (auto ev = client.next_event(reconnect_policy::follow_probe_after, o.stop)) {
      last_event = std::chrono::steady_clock::now();
      const auto cmd = event_command(*ev, client.endpoint());
      if (auto r = s.feed(cmd, ev->views()[2]); !r) {
        throw std::runtime_error("malformed event from the broker at " + client.endpoint() + ": " +
                                 r.message());
      }
      continue;
    }
    if (client.connection_dropped()) {
      attach(client, job_id, s, o, true);
      continue;
    }
    try {
      const wire::job_detail d = job_now(client, job_id);
      const auto silent = std::chrono::steady_clock::now() - last_event;
      if (wire::job_state_is_final(d.summary.state)) {
        s.on_final(d.summary, d.output);
      } else if (silent >= silence_notice) {
        s.on_silence(d.summary,
                     std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
      }
    } catch (const broker_timeout&) {
      attach(client, job_id, s, o, true);
    }
  }
  return follow_end::ended;
}

}  // namespace hearth::client
