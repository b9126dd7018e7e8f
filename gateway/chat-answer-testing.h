// For the tests of the Responses and Anthropic answers (responses-api_test.cpp,
// anthropic-api_test.cpp): a responder that records what a client would receive, the job events
// a node's output makes, and the checks of a parser's outcome that both APIs' tests make.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "gateway/http.h"
#include "gateway/job-events-testing.h"
#include "gateway/openai-request.h"
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

// Job 7's events.
inline wire::job_tokens tokens(uint32_t attempt, uint64_t seq, std::string text) {
  return job_tokens_of(7, attempt, seq, std::move(text));
}

inline wire::job_done completed(const char* stop_reason = "end_of_generation") {
  return job_completed(7, stop_reason, 11, 5);
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

// The request `parse` (parse_responses_request, parse_anthropic_request) made of `body`; a
// refusal fails the test, naming the field, and gives an empty request.
template <class Request, class Parse>
Request parsed_by(Parse parse, const std::string& body) {
  auto r = parse(body);
  if (auto* e = std::get_if<request_refusal>(&r)) {
    ADD_FAILURE() << e->param << ": " << e->message;
    return {};
  }
  return std::get<Request>(std::move(r));
}

// `parse` refuses `body` with a 400 naming `param`, its message saying `says`.
template <class Parse>
void expect_refused(Parse parse, const std::string& body, const std::string& param,
                    const std::string& says) {
  auto r = parse(body);
  auto* e = std::get_if<request_refusal>(&r);
  ASSERT_TRUE(e) << "accepted: " << body;
  EXPECT_EQ(e->status, 400) << body;
  EXPECT_EQ(e->param, param) << body;
  EXPECT_NE(e->message.find(says), std::string::npos) << e->message;
}

// What the client received of an answer to `r` (job 7, created 100) fed `lines` of output, as
// attempt 1's token events, and then `done`; the answer has ended.
template <class Answer, class Request>
std::shared_ptr<recording_responder> answered(Request r, const std::vector<std::string>& lines,
                                              const wire::job_done& done) {
  auto rec = std::make_shared<recording_responder>();
  Answer a(std::move(r), 100, rec);
  a.accepted(7);
  uint64_t seq = 0;
  for (const auto& l : lines) a.event(tokens(1, seq++, l));
  a.event(done);
  EXPECT_TRUE(a.ended());
  return rec;
}

}  // namespace hearth::gateway::testing
