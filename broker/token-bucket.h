// A token bucket: at most `burst` events at once, then `rate` per second on average. The broker
// limits node_hello with it (per connection and overall) and the log lines about refusals.
#pragma once

#include <algorithm>
#include <chrono>

namespace hearth::broker {

class token_bucket {
 public:
  using clock = std::chrono::steady_clock;

  token_bucket(double rate_per_s, double burst, clock::time_point now)
      : rate_(rate_per_s), burst_(burst), tokens_(burst), last_(now) {}

  // Takes one token if there is one (after refilling for the time since the last call).
  bool take(clock::time_point now) {
    refill(now);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

  // Full again: it remembers nothing a fresh bucket would not, so it may be dropped.
  bool full(clock::time_point now) {
    refill(now);
    return tokens_ >= burst_;
  }

 private:
  void refill(clock::time_point now) {
    if (now <= last_) return;
    tokens_ =
        std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }

  double rate_;
  double burst_;
  double tokens_;
  clock::time_point last_;
};

}  // namespace hearth::broker
