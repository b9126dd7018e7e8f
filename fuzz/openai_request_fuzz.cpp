// libFuzzer target for parse_openai_request and openai_response (gateway/openai-request.cpp): an
// HTTP body from any client, and the job output a node sent back. The first byte picks the
// endpoint ('c' chat, else completions); the rest is the body, and after a NUL byte (which JSON
// has nowhere outside strings) the job's output. Every input is accepted or refused, never thrown
// on; a refusal is a 400 with a message; an accepted request is one the broker's check passes,
// with a model and text to run; the response to a well-formed output (plain text, or output events
// when the request asked for events) is JSON that names its model, and to any output a 200 or a
// 500, JSON either way.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "gateway/openai-request.h"
#include "schema/job-params.h"
#include "schema/output-events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  using namespace hearth::gateway;
  if (size == 0) return 0;
  const auto endpoint =
      data[0] == 'c' ? openai_endpoint::chat_completions : openai_endpoint::completions;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = input.find('\0');
  const std::string_view body = input.substr(0, nul);
  const std::string_view output = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  auto parsed = parse_openai_request(endpoint, body);
  if (auto* refused = std::get_if<request_refusal>(&parsed)) {
    FUZZ_CHECK(refused->status == 400);
    FUZZ_CHECK(!refused->message.empty());
    return 0;
  }
  const openai_request& r = std::get<openai_request>(parsed);
  FUZZ_CHECK(r.endpoint == endpoint);
  FUZZ_CHECK(!r.submit.model.empty());
  FUZZ_CHECK(wire::job_params_check(r.submit.params).ok());
  FUZZ_CHECK(r.submit.params.stop.size() <= 4);
  if (endpoint == openai_endpoint::chat_completions) {
    FUZZ_CHECK(!r.submit.messages.empty() && r.submit.prompt.empty());
  } else {
    FUZZ_CHECK(!r.submit.prompt.empty() && r.submit.messages.empty());
  }
  wire::job_done done;
  done.job_id = 1;
  done.stop_reason = "max_tokens";
  // A well-formed output: the prompt's text, as plain text or as output events.
  std::string good(r.submit.prompt);
  if (r.submit.params.api.events) {
    wire::output_event e;
    e.text = r.submit.prompt;
    good = wire::output_event_line(e);
    e.kind = wire::output_event_kind::finish;
    e.text = "stop";
    good += wire::output_event_line(e);
  }
  const std::string response = openai_response_body(r, 1, 0, good, done);
  const auto j = nlohmann::json::parse(response, nullptr, false);
  FUZZ_CHECK(!j.is_discarded());
  FUZZ_CHECK(j["model"] == r.submit.model);
  // Whatever a node sent: an answer or a 500 saying the output is not what it should be.
  const http_response any = openai_response(r, 1, 0, output, done);
  FUZZ_CHECK(any.status == 200 || any.status == 500);
  FUZZ_CHECK(!nlohmann::json::parse(any.body, nullptr, false).is_discarded());
  return 0;
}
