#include "client/broker-retry.h"

#include <algorithm>
#include <thread>

namespace hearth::client {

broker_retry::broker_retry(broker_client& client, std::chrono::seconds retry_for, notice_fn notice,
                           bool retry_for_given)
    : client_(client),
      retry_for_(retry_for),
      notice_(std::move(notice)),
      retry_for_given_(retry_for_given),
      start_(std::chrono::steady_clock::now()),
      wait_(reconnect_policy::request_steps, retry_for) {}

void broker_retry::announce() {
  if (announced_ || retry_for_.count() <= 0) return;
  announced_ = true;
  const auto now = std::chrono::steady_clock::now();
  wait_.lost(now);
  if (never_reached() && !retry_for_given_) {
    const auto left =
        std::chrono::ceil<std::chrono::seconds>(start_ + reconnect_policy::start_window - now);
    notice_("hearth: nothing answers at " + client_.endpoint() + "; waiting up to " +
            std::to_string(std::max<int64_t>(left.count(), 1)) +
            " s more for a broker to start there\n");
    return;
  }
  notice_("hearth: the broker at " + client_.endpoint() + " does not answer; retrying for up to " +
          std::to_string(retry_for_.count()) + " s\n");
}

bool broker_retry::wait_for_next_try() {
  if (retry_for_.count() <= 0) return false;
  announce();
  const auto until = never_reached() && !retry_for_given_
                         ? start_ + reconnect_policy::start_window
                         : std::chrono::steady_clock::time_point::max();
  const auto wait = wait_.next_wait(std::chrono::steady_clock::now(), until);
  if (!wait) return false;
  std::this_thread::sleep_for(*wait);
  return true;
}

void broker_retry::throw_if_never_reached() {
  if (!never_reached()) return;
  const auto waited =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_);
  throw broker_unreachable("nothing answers at " + client_.endpoint() + " (no connection in " +
                           std::to_string(waited.count()) +
                           " s): is hearth-broker running there, and is the address right "
                           "(--broker, $HEARTH_BROKER)? --retry-for SECONDS waits longer for a "
                           "broker that is starting");
}

void broker_retry::got_through() {
  if (announced_) notice_("hearth: the broker at " + client_.endpoint() + " answers again\n");
  announced_ = false;
  wait_.recovered();
}

}  // namespace hearth::client
