// What curl got from the gateway, for the tests that drive it over HTTP (each runs curl its own
// way: its flags, where the body goes): the status and the body.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hearth::testing {

struct http_answer {
  int status = 0;  // 0: nothing answered
  std::string body;
  // The body as JSON; discarded when it is not JSON.
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

}  // namespace hearth::testing
