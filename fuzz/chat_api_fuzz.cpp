// libFuzzer target for parse_responses_request (gateway/responses-api.cpp) and
// parse_anthropic_request (gateway/anthropic-api.cpp): HTTP bodies from any client. The first
// byte picks the API ('a' Anthropic's messages, else the Responses API), the rest is the body.
// Every input is accepted or refused, never thrown on; a refusal is a 400 with a message; an
// accepted request is one the broker's check passes, with a model and messages to run; and an
// answer to it, fed the body itself as the job's output, ends with a response that is JSON.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "gateway/anthropic-api.h"
#include "gateway/responses-api.h"
#include "schema/job-params.h"

namespace {

using namespace hearth;
using namespace hearth::gateway;

class kept_responder : public responder {
 public:
  std::string body;
  void reply(http_response r) override { body = std::move(r.body); }
  void start_events() override {}
  void event(std::string_view) override {}
  void comment(std::string_view) override {}
  void end_events() override {}
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}
};

template <class Request>
void check_accepted(const Request& r) {
  FUZZ_CHECK(!r.submit.model.empty());
  FUZZ_CHECK(!r.submit.messages.empty());
  FUZZ_CHECK(wire::job_params_check(r.submit.params).ok());
}

template <class Answer, class Request>
void answer_with(Request r, std::string_view output) {
  auto out = std::make_shared<kept_responder>();
  r.stream = false;
  Answer a(std::move(r), 0, out);
  a.accepted(1);
  wire::job_tokens t;
  t.job_id = 1;
  t.text = std::string(output);
  a.event(t);
  wire::job_done d;
  d.job_id = 1;
  d.stop_reason = "max_tokens";
  a.event(d);
  FUZZ_CHECK(a.ended());
  FUZZ_CHECK(!nlohmann::json::parse(out->body, nullptr, false).is_discarded());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] == 'a') {
    auto parsed = parse_anthropic_request(body);
    if (auto* refused = std::get_if<request_refusal>(&parsed)) {
      FUZZ_CHECK(refused->status == 400 && !refused->message.empty());
      return 0;
    }
    auto& r = std::get<anthropic_request>(parsed);
    check_accepted(r);
    answer_with<anthropic_answer>(std::move(r), body);
    return 0;
  }
  auto parsed = parse_responses_request(body);
  if (auto* refused = std::get_if<request_refusal>(&parsed)) {
    FUZZ_CHECK(refused->status == 400 && !refused->message.empty());
    return 0;
  }
  auto& r = std::get<responses_request>(parsed);
  check_accepted(r);
  answer_with<responses_answer>(std::move(r), body);
  return 0;
}
