// A log line that a peer can provoke (a refused key, a refused hello, a dropped peer), kept from
// becoming a flood: at most `burst` lines at once, then `per_s` a second; the lines left out are
// counted, and the next line says how many.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "broker/token-bucket.h"

namespace hearth::broker {

class log_limiter {
 public:
  log_limiter(double per_s, double burst) : bucket_(per_s, burst, token_bucket::clock::now()) {}

  // nullopt: leave this line out. Otherwise log it, followed by the suffix returned: "" or
  // " (and N more since the last line)".
  std::optional<std::string> admit(token_bucket::clock::time_point now) {
    if (!bucket_.take(now)) {
      ++left_out_;
      return std::nullopt;
    }
    std::string suffix;
    if (left_out_ > 0) suffix = " (and " + std::to_string(left_out_) + " more since the last line)";
    left_out_ = 0;
    return suffix;
  }

 private:
  token_bucket bucket_;
  uint64_t left_out_ = 0;
};

}  // namespace hearth::broker
