#include "tools/broker-cli.h"

#include <unistd.h>

#include <cmath>
#include <ctime>
#include <stdexcept>

#include "tools/stream-view.h"

namespace hearth::cli {

// A running job's output grows while its pages are read (the total is the latest page's); when a
// new attempt restarts it, reading starts over.
wire::job_detail fetch_job(broker_client& client, uint64_t job_id) {
  for (int tries = 0; tries < 5; ++tries) {
    wire::get_job req;
    req.job_id = job_id;
    auto reply = client.request<wire::job_reply>(req);
    wire::job_detail d = std::move(reply.job);
    bool restarted = false;
    while (!restarted && (d.output.size() < reply.output_total_bytes ||
                          d.prompt.size() < reply.prompt_total_bytes)) {
      req.output_offset = d.output.size();
      req.prompt_offset = d.prompt.size();
      const uint32_t attempts = d.summary.attempts;
      reply = client.request<wire::job_reply>(req);
      restarted = reply.job.summary.attempts != attempts ||
                  reply.output_offset != req.output_offset ||
                  reply.prompt_offset != req.prompt_offset ||
                  (reply.job.output.empty() && reply.job.prompt.empty());
      d.output += reply.job.output;
      d.prompt += reply.job.prompt;
      d.summary = std::move(reply.job.summary);
      d.events = std::move(reply.job.events);
    }
    if (!restarted) return d;
  }
  throw std::runtime_error("job " + std::to_string(job_id) +
                           " kept restarting while its output was read; try again");
}

namespace {

// How long a followed job may stay silent before we ask the broker whether it still exists
// and whether the job ended without its job_done reaching us (a broker restart forgets
// watchers). Queued jobs are silent for long; one get_job per interval costs nothing.
constexpr std::chrono::seconds silence_probe{15};

void write_out(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

void write_err(std::string_view s) {
  std::fflush(stdout);  // text and notices interleave in the order they happened
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

// The job's record when it has ended, else nullopt. Throws when the broker is gone.
std::optional<wire::job_detail> ended_job(broker_client& client, uint64_t job_id) {
  wire::get_job g;
  g.job_id = job_id;
  try {
    // The first page tells whether it ended; only then is the whole output worth reading.
    auto r = client.request<wire::job_reply>(g);
    if (!wire::job_state_is_final(r.job.summary.state)) return std::nullopt;
    return fetch_job(client, job_id);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("following job " + std::to_string(job_id) + ": " + e.what());
  }
}

// A job event's kind and body, or throws on an error from the broker.
wire::command event_command(const net::received& ev, const std::string& endpoint) {
  const auto views = ev.views();
  const auto cmd = wire::command(uint8_t(views[1][0]));
  if (cmd == wire::command::error) {
    auto e = wire::decode<wire::error_reply>(views[2]);
    throw std::runtime_error(e ? e->message : "malformed error from the broker at " + endpoint);
  }
  return cmd;
}

template <class M>
M decode_event(const net::received& ev, const std::string& endpoint) {
  auto m = wire::decode<M>(ev.views()[2]);
  if (!m) {
    throw std::runtime_error("malformed " + std::string(wire::command_name(M::cmd)) +
                             " from the broker at " + endpoint + ": " + m.message());
  }
  return std::move(m).value();
}

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
// the text starts over.
int follow_json(broker_client& client, uint64_t job_id) {
  stream_order order;
  std::string text;  // the current attempt's text
  auto begin = [&](uint32_t attempt) {
    if (order.begin_attempt(attempt)) text.clear();
  };
  while (true) {
    auto ev = client.next_event(silence_probe);
    if (!ev) {
      auto d = ended_job(client, job_id);
      if (!d) continue;
      wire::job_done done;
      done.job_id = job_id;
      done.attempt = order.attempt();
      done.state = d->summary.state;
      done.stop_reason = d->summary.stop_reason;
      done.error = d->summary.error;
      done.n_prompt = d->summary.n_prompt;
      done.n_gen = d->summary.n_gen;
      if (d->output.size() > text.size() && std::string_view(d->output).starts_with(text)) {
        const wire::job_tokens rest{
            job_id, done.attempt, order.next_seq(),
            uint32_t(done.n_gen > order.next_seq() ? done.n_gen - order.next_seq() : 0),
            d->output.substr(text.size())};
        print_json(event_json("tokens", rest));
      }
      print_json(event_json("done", done));
      return report_end(done);
    }
    const auto& ep = client.endpoint();
    switch (event_command(*ev, ep)) {
      case wire::command::job_queued: {
        auto e = decode_event<wire::job_queued>(*ev, ep);
        if (e.job_id == job_id) print_json(event_json("queued", e));
        break;
      }
      case wire::command::job_running: {
        auto e = decode_event<wire::job_running>(*ev, ep);
        if (e.job_id != job_id || (order.started() && e.attempt < order.attempt())) break;
        begin(e.attempt);
        print_json(event_json("running", e));
        break;
      }
      case wire::command::job_tokens: {
        auto e = decode_event<wire::job_tokens>(*ev, ep);
        if (e.job_id != job_id) break;
        if (!order.started() || e.attempt > order.attempt()) begin(e.attempt);
        const uint64_t had = order.next_seq();
        switch (order.accept(e)) {
          case chunk_verdict::append:
            text += e.text;
            print_json(event_json("tokens", e));
            break;
          case chunk_verdict::restate:
            // Only the part beyond what was already sent, so that texts still concatenate.
            if (std::string_view(e.text).starts_with(text)) {
              e.text.erase(0, text.size());
              e.n_tokens = uint32_t(e.seq + e.n_tokens - had);
              e.seq = had;
              text += e.text;
            } else {
              text = e.text;
            }
            print_json(event_json("tokens", e));
            break;
          case chunk_verdict::duplicate:
          case chunk_verdict::old_attempt:
            break;
        }
        break;
      }
      case wire::command::job_restarted: {
        auto e = decode_event<wire::job_restarted>(*ev, ep);
        if (e.job_id != job_id || (order.started() && e.attempt <= order.attempt())) break;
        begin(e.attempt);
        print_json(event_json("restarted", e));
        break;
      }
      case wire::command::job_done: {
        auto e = decode_event<wire::job_done>(*ev, ep);
        if (e.job_id != job_id) break;
        print_json(event_json("done", e));
        return report_end(e);
      }
      default:
        break;
    }
  }
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return n;
}

}  // namespace

void add_broker_options(CLI::App* cmd, broker_options& o) {
  cmd->add_option("--broker", o.endpoint,
                  "Broker endpoint (default: $HEARTH_BROKER, else " +
                      std::string(broker_endpoint_default) + ")");
  cmd->add_option("--broker-key", o.broker_key,
                  "The broker's public certificate, for CURVE (default: $HEARTH_BROKER_KEY, else "
                  "$XDG_CONFIG_HOME/hearth/broker.pub when it and client.key exist)");
  cmd->add_option("--key", o.key,
                  "This client's secret certificate from `hearth keygen` (default: $HEARTH_KEY, "
                  "else $XDG_CONFIG_HOME/hearth/client.key)");
}

int follow_job(broker_client& client, uint64_t job_id, bool json_lines,
               std::optional<uint32_t> position) {
  if (json_lines) return follow_json(client, job_id);
  stream_view view(job_id, write_out, write_err, isatty(STDERR_FILENO) != 0);
  if (position) view.on_queued({job_id, *position});
  while (!view.done()) {
    auto ev = client.next_event(silence_probe);
    if (!ev) {
      if (auto d = ended_job(client, job_id)) view.on_final(d->summary, d->output);
      continue;
    }
    const auto cmd = event_command(*ev, client.endpoint());
    if (auto r = view.feed(cmd, ev->views()[2]); !r) {
      throw std::runtime_error("malformed event from the broker at " + client.endpoint() + ": " +
                               r.message());
    }
  }
  return view.exit_code();
}

void print_json(const json& j) {
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_out(s);
}

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], display_width(row[i]));
    }
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t i = 0; i < row.size(); ++i) {
      s += row[i];
      if (i + 1 < row.size()) s += std::string(width[i] - display_width(row[i]) + 2, ' ');
    }
    s += "\n";
    std::fwrite(s.data(), 1, s.size(), stdout);
  };
  line(header);
  for (const auto& r : rows) line(r);
  std::fflush(stdout);
}

std::string format_local_time(int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = std::time_t(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string format_local_time_ms(int64_t ms) {
  if (ms <= 0) return "-";
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", int(ms % 1000));
  return format_local_time(ms) + frac;
}

std::string format_duration(int64_t ms) {
  if (ms < 0) ms = 0;
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%dms", int(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%.1fs", double(ms) / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(ms / 60'000), int(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", int(ms / 3'600'000), int(ms / 60'000 % 60));
  }
  return buf;
}

std::string format_ago(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "never";
  const int64_t s = std::max<int64_t>(0, (now_ms - ms) / 1000);
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "m ago";
  if (s < 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  const double mib = double(bytes) / (1 << 20);
  if (mib < 1024) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", mib);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", mib / 1024);
  }
  return buf;
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

namespace detail {
double float_for_json(float f) {
  if (!std::isfinite(f)) return double(f);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", double(f));
  return std::strtod(buf, nullptr);
}
}  // namespace detail

}  // namespace hearth::cli
