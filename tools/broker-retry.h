// Trying a broker request again while the broker does not answer (down, restarting) or cannot
// store it (storage_unavailable): backoff from 250 ms doubling to 5 s, for `retry_for` from the
// first failure (or announce()), telling the user once that it waits and once that it got through.
// Other errors are final. Each try after the first should use a fresh socket
// (broker_client::reconnect), so that a request the dead connection still held is not sent twice.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "tools/broker-client.h"

namespace hearth::cli {

class broker_retry {
 public:
  using notice_fn = std::function<void(std::string_view)>;
  // `endpoint` names the broker in the notices, written to `notice` (stderr in the commands).
  broker_retry(std::string endpoint, std::chrono::seconds retry_for, notice_fn notice);

  // Runs `try_once(n)` (n = 0, 1, ... the try) until it returns; returns its value. Rethrows its
  // error when it is final, or when retry_for has passed.
  template <class F>
  auto run(F&& try_once) -> decltype(try_once(0)) {
    for (int n = 0;; ++n) {
      try {
        if constexpr (std::is_void_v<decltype(try_once(0))>) {
          try_once(n);
          got_through();
          return;
        } else {
          auto v = try_once(n);
          got_through();
          return v;
        }
      } catch (const broker_timeout&) {
        if (!wait_for_next_try()) throw;
      } catch (const broker_error& e) {
        if (e.code() != wire::error_code::storage_unavailable || !wait_for_next_try()) throw;
      }
    }
  }

  // Says that it waits now, before the first try fails (the connection is known to be lost);
  // retry_for counts from here.
  void announce();

 private:
  // Sleeps the backoff and returns true, or false when retry_for has passed.
  bool wait_for_next_try();
  void got_through();

  std::string endpoint_;
  std::chrono::seconds retry_for_;
  notice_fn notice_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds backoff_;
  bool announced_ = false;
};

}  // namespace hearth::cli
