// For the tests of the Responses and Anthropic answers (responses-api_test.cpp,
// anthropic-api_test.cpp): a responder that records what a client would receive, and the job
// events a node's output makes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gateway/http.h"
#include "schema/messages.h"
#include "schema/output-events.h"

namespace hearth::gateway::testing {

// What went to the client, in order.
class recording_responder : public responder {
 public:
  struct sse {
    std::string name;  // the event's type line ("" for a nameless event)
    nlohmann::json data;
  };
  int status = 0;  // a whole reply's
  std::string body;
  bool started = false, ended = false;
  std::vector<sse> events;
  int comments = 0;

  void reply(http_response r) override {
    status = r.status;
    body = r.body;
  }
  void start_events() override { started = true; }
  void event(std::string_view data) override { events.push_back({"", parse(data)}); }
  void named_event(std::string_view name, std::string_view data) override {
    events.push_back({std::string(name), parse(data)});
  }
  void comment(std::string_view) override { ++comments; }
  void end_events() override { ended = true; }
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}

  nlohmann::json json_body() const { return nlohmann::json::parse(body); }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& e : events) n.push_back(e.name);
    return n;
  }

 private:
  static nlohmann::json parse(std::string_view data) {
    return nlohmann::json::parse(data, nullptr, false);
  }
};

inline wire::job_tokens tokens(uint32_t attempt, uint64_t seq, std::string text) {
  wire::job_tokens t;
  t.job_id = 7;
  t.attempt = attempt;
  t.seq = seq;
  t.n_tokens = 1;
  t.text = std::move(text);
  return t;
}

inline wire::job_done completed(const char* stop_reason = "end_of_generation") {
  wire::job_done d;
  d.job_id = 7;
  d.attempt = 1;
  d.state = wire::job_state::completed;
  d.stop_reason = stop_reason;
  d.n_prompt = 11;
  d.n_gen = 5;
  return d;
}

inline std::string content_line(std::string text) {
  wire::output_event e;
  e.kind = wire::output_event_kind::content;
  e.text = std::move(text);
  return wire::output_event_line(e);
}

inline std::string reasoning_line(std::string text) {
  wire::output_event e;
  e.kind = wire::output_event_kind::reasoning;
  e.text = std::move(text);
  return wire::output_event_line(e);
}

inline std::string call_line(std::string id, std::string name, std::string arguments) {
  wire::output_event e;
  e.kind = wire::output_event_kind::tool_call;
  e.call = wire::tool_call{std::move(id), std::move(name), std::move(arguments)};
  return wire::output_event_line(e);
}

inline std::string finish_line(std::string reason) {
  wire::output_event e;
  e.kind = wire::output_event_kind::finish;
  e.text = std::move(reason);
  return wire::output_event_line(e);
}

}  // namespace hearth::gateway::testing
