// libFuzzer target for parse_openai_request (gateway/openai-request.cpp): an HTTP body from any
// client. The first byte picks the endpoint ('c' chat, else completions), the rest is the body.
// Every input is accepted or refused, never thrown on; a refusal is a 400 with a message; an
// accepted request is one the broker's check passes, with a model and text to run, and its
// response body is JSON that names its model.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "gateway/openai-request.h"
#include "schema/job-params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  using namespace hearth::gateway;
  if (size == 0) return 0;
  const auto endpoint =
      data[0] == 'c' ? openai_endpoint::chat_completions : openai_endpoint::completions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
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
  const std::string response = openai_response_body(r, 1, 0, r.submit.prompt, done);
  const auto j = nlohmann::json::parse(response, nullptr, false);
  FUZZ_CHECK(!j.is_discarded());
  FUZZ_CHECK(j["model"] == r.submit.model);
  return 0;
}
