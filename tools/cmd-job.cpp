// hearth job: everything the broker recorded about one job: its summary, parameters, prompt,
// timeline of events, timings and output.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>

#include "schema/zmq-io.h"
#include "tools/broker-cli.h"
#include "tools/commands.h"
#include "tools/events-view.h"

namespace hearth::cli {
namespace {

struct job_options {
  broker_options broker;
  uint64_t job_id = 0;
  bool json = false;
};

// Times derived from the record; negative when not known (yet).
struct job_timings {
  int64_t queue_wait_ms = -1;     // the time spent queued: created -> assigned, and after each
                                  // requeue -> assigned again (never the time on a lost node)
  int64_t start_ms = -1;          // the latest attempt: assigned -> started (the node loading
                                  // the model, its prompt), not queue wait nor run time
  std::string start_detail;       // the node's word on it ("model load 1.03 s"), as recorded
  int64_t run_ms = -1;            // started -> finished, or -> now while running
  double tokens_per_second = -1;  // generated tokens over run_ms (prompt processing included)
  bool running = false;
};

// The time the job waited in the queue, from its events: a job queued again after its node was
// lost waits again from the requeue, while the time on the lost node is no waiting. -1 when the
// events say nothing of it.
int64_t queue_wait_of(const wire::job_detail& d, int64_t now_ms) {
  int64_t waited = 0;
  int64_t since = -1;  // queued since then; -1 while assigned
  bool seen = false;
  for (const auto& e : d.events) {
    if (e.event == "queued" || e.event == "requeued") {
      since = e.time_ms;
      seen = true;
    } else if (e.event == "assigned" && since >= 0) {
      waited += std::max<int64_t>(0, e.time_ms - since);
      since = -1;
    }
  }
  if (!seen) return -1;
  if (since >= 0 && d.summary.finished_ms <= 0) waited += std::max<int64_t>(0, now_ms - since);
  return waited;
}

job_timings timings_of(const wire::job_detail& d, int64_t now_ms) {
  const auto& s = d.summary;
  job_timings t;
  t.queue_wait_ms = queue_wait_of(d, now_ms);
  int64_t assigned_ms = -1;
  for (const auto& e : d.events) {
    if (e.event == "assigned") {
      assigned_ms = e.time_ms;
      t.start_ms = -1;
      t.start_detail.clear();
    } else if (e.event == "started" && assigned_ms >= 0) {
      t.start_ms = std::max<int64_t>(0, e.time_ms - assigned_ms);
      t.start_detail = e.detail;
    }
  }
  if (s.started_ms > 0) {
    t.running = s.finished_ms <= 0;
    t.run_ms = (t.running ? now_ms : s.finished_ms) - s.started_ms;
  }
  if (t.run_ms > 0 && s.n_gen > 0) t.tokens_per_second = s.n_gen * 1000.0 / double(t.run_ms);
  return t;
}

std::string float_text(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(f));
  return buf;
}

// A text block indented under its heading, so that it stands apart from the fields; written as
// its pieces come (a long output page by page).
class block_writer {
 public:
  explicit block_writer(const std::string& heading) { write_out(heading + "\n  "); }
  void add(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 32);
    for (char c : text) {
      out += c;
      if (c == '\n') out += "  ";
    }
    write_out(out);
  }
  void end() { write_out("\n"); }
};

void print_block(const std::string& heading, const std::string& text) {
  block_writer b(heading);
  b.add(text);
  b.end();
}

// A JSON text's first line, cut to `max` bytes, for a field's one line.
std::string one_line(std::string_view text, size_t max = 60) {
  std::string s(text.substr(0, std::min(text.find('\n'), max)));
  return s.size() < text.size() ? s + "... (" + std::to_string(text.size()) + " bytes)" : s;
}

// The tools' function names, from OpenAI's tools array (the broker checked it is an array of
// objects); the text itself when it does not parse as that.
std::string tool_names(const std::string& tools) {
  const json j = json::parse(tools, nullptr, false);
  if (!j.is_array()) return one_line(tools);
  std::string names;
  for (const auto& t : j) {
    const auto f = t.find("function");
    const bool named = t.is_object() && f != t.end() && f->is_object() && f->contains("name") &&
                       (*f)["name"].is_string();
    names += (names.empty() ? "" : ", ") + (named ? (*f)["name"].get<std::string>() : "?");
  }
  return names + " (" + std::to_string(j.size()) + (j.size() == 1 ? " tool)" : " tools)");
}

// api_params (issue 56), each only when it asks for something.
template <class Field>
void print_api_params(const wire::api_params& a, const Field& field) {
  if (!a.tools.empty()) field("tools", tool_names(a.tools));
  if (!a.tool_choice.empty()) field("tool_choice", a.tool_choice);
  if (!a.parallel_tool_calls) field("parallel calls", "false (one tool call at most)");
  if (!a.json_schema.empty()) field("json_schema", one_line(a.json_schema));
  if (!a.grammar.empty()) field("grammar", one_line(a.grammar));
  if (!a.template_kwargs.empty()) field("template_kwargs", one_line(a.template_kwargs));
  if (a.logprobs) field("logprobs", "true, " + std::to_string(a.top_logprobs) + " alternatives");
  if (a.n != 1) field("choices", std::to_string(a.n));
  std::string bias;
  for (const auto& b : a.logit_bias)
    bias += (bias.empty() ? "" : ", ") + std::to_string(b.token) + ":" + float_text(b.bias);
  if (!bias.empty()) field("logit_bias", bias);
  if (a.events) field("events", "true (the output is output events, shown rendered)");
}

// A chat message: its role (a tool message's function and the call it answers), its reasoning,
// its text and its tool calls, as hearth submit prints a job's.
void print_message(const wire::chat_message& m) {
  std::string heading = "  [" + m.role + (m.name.empty() ? "" : " " + m.name) +
                        (m.tool_call_id.empty() ? "" : ", answers " + m.tool_call_id) + "]";
  std::string text;
  if (!m.reasoning_content.empty()) text = "<think>" + m.reasoning_content + "</think>\n";
  text += m.content;
  for (const auto& c : m.tool_calls) {
    if (!text.empty() && text.back() != '\n') text += "\n";
    text += "tool call: " + c.name + "(" + c.arguments + ") [" + c.id + "]";
  }
  print_block(heading, text);
}

void print_detail(const wire::job_detail& d, const job_timings& t) {
  const auto& s = d.summary;
  const auto& p = d.params;
  auto field = [](const char* name, const std::string& value) {
    std::printf("  %-15s %s\n", name, value.c_str());  // repeat_penalty is the longest
  };
  std::printf("job %llu\n", static_cast<unsigned long long>(s.job_id));
  std::string state(wire::job_state_name(s.state));
  if (!s.stop_reason.empty()) state += " (" + s.stop_reason + ")";
  field("state", state);
  if (!d.waiting.empty()) field("waiting", d.waiting);
  if (!s.error.empty()) field("error", s.error);
  if (!s.owner.empty()) field("owner", s.owner);
  field("model", s.model);
  field("priority", std::to_string(s.priority));
  field("node", or_dash(s.node));
  field("attempts", std::to_string(s.attempts));
  field("created", format_local_time_ms(s.created_ms));
  field("started", format_local_time_ms(s.started_ms));
  field("finished", format_local_time_ms(s.finished_ms));
  field("tokens",
        "prompt " + std::to_string(s.n_prompt) + ", generated " + std::to_string(s.n_gen));
  field("queue wait", t.queue_wait_ms >= 0 ? format_duration(t.queue_wait_ms) : "-");
  field("node start", t.start_ms < 0 ? "-"
                      : t.start_detail.empty()
                          ? format_duration(t.start_ms)
                          : format_duration(t.start_ms) + " (" + t.start_detail + ")");
  field("run time", t.run_ms >= 0 ? format_duration(t.run_ms) + (t.running ? " so far" : "") : "-");
  if (t.tokens_per_second >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f tokens/s (generated / run time)", t.tokens_per_second);
    field("speed", buf);
  }

  std::string stops;
  for (const auto& st : p.stop)
    stops +=
        (stops.empty() ? "" : ", ") + json(st).dump(-1, ' ', false, json::error_handler_t::replace);
  std::printf("params\n");
  field("max_tokens", std::to_string(p.max_tokens));
  field("temperature", float_text(p.temperature));
  field("top_k", std::to_string(p.top_k));
  field("top_p", float_text(p.top_p));
  field("min_p", float_text(p.min_p));
  field("repeat_penalty", float_text(p.repeat_penalty));
  field("repeat_last_n", std::to_string(p.repeat_last_n));
  field("seed", std::to_string(p.seed));
  field("stop", stops.empty() ? "-" : stops);
  if (!p.chat_template.empty()) field("chat_template", p.chat_template);
  // Only when not the default: they matter for thinking models alone.
  if (!p.enable_thinking) field("enable_thinking", "false");
  if (p.show_thinking) field("show_thinking", "true (the output keeps the <think> block)");
  print_api_params(p.api, field);

  if (d.messages.empty()) {
    print_block("prompt", d.prompt);
  } else {
    std::printf("messages\n");
    for (const auto& m : d.messages) print_message(m);
  }

  // Per attempt: where it ran and how it ended, from the events that name a node.
  struct attempt_span {
    std::string node;
    int64_t first_ms = 0, last_ms = 0;
    std::string last_event, detail;
  };
  std::map<uint32_t, attempt_span> attempts;
  for (const auto& e : d.events) {
    if (e.node.empty()) continue;
    auto [it, fresh] = attempts.try_emplace(e.attempt);
    auto& a = it->second;
    if (fresh) {
      a.node = e.node;
      a.first_ms = e.time_ms;
    }
    a.last_ms = e.time_ms;
    a.last_event = e.event;
    a.detail = e.detail;
  }
  if (!attempts.empty()) {
    std::printf("attempts\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& [n, a] : attempts) {
      rows.push_back({"  " + std::to_string(n), a.node, format_local_time_ms(a.first_ms),
                      format_duration(a.last_ms - a.first_ms),
                      a.last_event + (a.detail.empty() ? "" : ": " + a.detail)});
    }
    print_table({"  ATTEMPT", "NODE", "FIRST EVENT", "SPAN", "LAST EVENT"}, rows);
  }

  std::printf("events\n");
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : d.events) {
    rows.push_back({"  " + format_local_time_ms(e.time_ms),
                    s.created_ms > 0 ? "+" + format_duration(e.time_ms - s.created_ms) : "",
                    e.event, std::to_string(e.attempt), or_dash(e.node), e.detail});
  }
  print_table({"  TIME", "SINCE", "EVENT", "ATTEMPT", "NODE", "DETAIL"}, rows);
  std::fflush(stdout);
}

// The output's text as it goes inside a JSON string: each page escaped on its own (pages end on
// UTF-8 character boundaries), invalid UTF-8 replaced as print_json does.
std::string json_string_body(std::string_view text) {
  const std::string quoted =
      json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

// The record as one JSON object whose "output" is written page by page as the pages come: the
// object is printed around a placeholder.
class json_record_writer {
 public:
  void begin(const wire::job_detail& d, const job_timings& t) {
    json j = wire_json(d);
    j["output"] = std::string(placeholder);
    json tj = json::object();
    tj["queue_wait_ms"] = t.queue_wait_ms >= 0 ? json(t.queue_wait_ms) : json(nullptr);
    tj["start_ms"] = t.start_ms >= 0 ? json(t.start_ms) : json(nullptr);
    tj["run_ms"] = t.run_ms >= 0 ? json(t.run_ms) : json(nullptr);
    tj["running"] = t.running;
    tj["tokens_per_second"] = t.tokens_per_second >= 0 ? json(t.tokens_per_second) : json(nullptr);
    j["timings"] = tj;
    const std::string all = j.dump(-1, ' ', false, json::error_handler_t::replace);
    // With its key: a string value equal to the placeholder cannot be taken for it.
    const std::string key = "\"output\":\"";
    const std::string mark = key + json_string_body(placeholder) + "\"";
    const size_t at = all.find(mark);
    write_out(all.substr(0, at + key.size()));
    rest_ = all.substr(at + mark.size() - 1) + "\n";
  }
  void add(std::string_view page) { write_out(json_string_body(page)); }
  void end() { write_out(rest_); }

 private:
  static constexpr std::string_view placeholder = "\x01hearth output\x01";
  std::string rest_;  // from the output's closing quote on
};

int show_job(const job_options& o) {
  broker_client client(o.broker);
  json_record_writer json_out;
  std::optional<block_writer> text_out;
  // An events job's output rendered (tools/events-view.h), reasoning and every choice shown.
  std::optional<events_printer> events_out;
  const bool whole = read_job(
      client, o.job_id,
      [&](wire::job_detail d) {
        const auto t = timings_of(d, net::wall_ms());
        if (o.json) {
          json_out.begin(d, t);
        } else {
          print_detail(d, t);
          text_out.emplace("output");
          if (d.params.api.events) {
            events_out.emplace([&](std::string_view text) { text_out->add(text); }, write_err,
                               events_printer::options{.reasoning = true});
          }
        }
      },
      [&](std::string_view page) {
        if (o.json) {
          json_out.add(page);
        } else if (events_out) {
          events_out->feed(page);
        } else {
          text_out->add(page);
        }
      });
  if (o.json) {
    json_out.end();
  } else {
    if (events_out) events_out->finish();
    text_out->end();
  }
  if (!whole) {
    write_err("hearth: job " + std::to_string(o.job_id) +
              " started a new attempt while its output was read: the output shown is the start "
              "of the previous attempt's\n");
    return 1;
  }
  return 0;
}

}  // namespace

action add_job(CLI::App& app) {
  auto o = std::make_shared<job_options>();
  CLI::App* cmd = app.add_subcommand(
      "job", "Show one job: state, parameters, prompt, events, timings and output");
  cmd->add_option("id", o->job_id, "Job id")->required();
  cmd->add_flag("--json", o->json, "The whole record as one JSON object, with \"timings\"");
  add_broker_options(cmd, o->broker);
  return [o] { return show_job(*o); };
}

}  // namespace hearth::cli
