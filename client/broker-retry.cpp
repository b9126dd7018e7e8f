#include "client/broker-retry.h"

#include <algorithm>
#include <thread>

namespace hearth::client {
namespace {
constexpr std::chrono::milliseconds first_backoff{250};
constexpr std::chrono::milliseconds max_backoff{5000};
}  // namespace

broker_retry::broker_retry(broker_client& client, std::chrono::seconds retry_for, notice_fn notice,
                           bool retry_for_given)
    : client_(client),
      retry_for_(retry_for),
      notice_(std::move(notice)),
      retry_for_given_(retry_for_given),
      start_(std::chrono::steady_clock::now()),
      backoff_(first_backoff) {}

void broker_retry::announce() {
  if (announced_ || retry_for_.count() <= 0) return;
  announced_ = true;
  deadline_ = std::chrono::steady_clock::now() + retry_for_;
  if (never_reached() && !retry_for_given_) {
    const auto left = std::chrono::ceil<std::chrono::seconds>(start_ + broker_start_window -
                                                              std::chrono::steady_clock::now());
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
  const auto now = std::chrono::steady_clock::now();
  auto deadline = deadline_;
  if (never_reached() && !retry_for_given_)
    deadline = std::min(deadline, start_ + broker_start_window);
  if (now >= deadline) return false;
  std::this_thread::sleep_for(
      std::min<std::chrono::steady_clock::duration>(backoff_, deadline - now));
  backoff_ = std::min(backoff_ * 2, max_backoff);
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
  backoff_ = first_backoff;
}

}  // namespace hearth::client
