// Trying a broker request again while the broker does not answer (down, restarting) or cannot
// store it (storage_unavailable), by the client library's schedule (client/reconnect-policy.h:
// backoff from 250 ms doubling to 5 s, for `retry_for` from the first failure or announce()),
// telling the user once that it waits and once that it got through. Other errors are final. Each
// try after the first should use a fresh socket (broker_client::reconnect), so that a request the
// dead connection still held is not sent twice.
//
// A broker that no connection has reached since the command began is another matter: most often
// the address is wrong or no broker runs there, and waiting a minute only hides that. Unless the
// user set --retry-for, such a broker gets reconnect_policy::start_window from the command's start,
// and then the command ends with broker_unreachable: "nothing answers at ADDRESS". A broker that
// was reached and went away (it restarts) keeps the whole retry_for.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "client/broker-client.h"
#include "client/reconnect-policy.h"

namespace hearth::client {

class broker_retry {
 public:
  using notice_fn = std::function<void(std::string_view)>;
  // `client`'s endpoint names the broker in the notices, written to `notice` (stderr in the
  // commands); whether it ever connected decides which limit applies. `retry_for_given`: the user
  // chose retry_for (--retry-for), which then applies to a broker never reached too.
  broker_retry(broker_client& client, std::chrono::seconds retry_for, notice_fn notice,
               bool retry_for_given = false);

  // Runs `try_once(n)` (n = 0, 1, ... the try) until it returns; returns its value. Rethrows its
  // error when it is final, or when retry_for has passed; throws broker_unreachable when the
  // broker was never reached within its window.
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
        if (!wait_for_next_try()) {
          throw_if_never_reached();
          throw;
        }
      } catch (const broker_error& e) {
        if (e.code() != wire::error_code::storage_unavailable || !wait_for_next_try()) throw;
      }
    }
  }

  // Says that it waits now, before the first try fails (the connection is known to be lost);
  // retry_for counts from here.
  void announce();

 private:
  // Sleeps the backoff and returns true, or false when the time to try has passed.
  bool wait_for_next_try();
  void got_through();
  bool never_reached() { return !client_.ever_connected(); }
  void throw_if_never_reached();

  broker_client& client_;
  std::chrono::seconds retry_for_;
  notice_fn notice_;
  bool retry_for_given_;
  std::chrono::steady_clock::time_point start_;  // of this retry: the unreached window's start
  reconnect_policy wait_;                        // lost from announce() until got_through()
  bool announced_ = false;
};

}  // namespace hearth::client
