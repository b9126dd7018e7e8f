#include "tools/broker-retry.h"

#include <algorithm>
#include <thread>

namespace hearth::cli {
namespace {
constexpr std::chrono::milliseconds first_backoff{250};
constexpr std::chrono::milliseconds max_backoff{5000};
}  // namespace

broker_retry::broker_retry(std::string endpoint, std::chrono::seconds retry_for, notice_fn notice)
    : endpoint_(std::move(endpoint)),
      retry_for_(retry_for),
      notice_(std::move(notice)),
      backoff_(first_backoff) {}

void broker_retry::announce() {
  if (announced_ || retry_for_.count() <= 0) return;
  announced_ = true;
  deadline_ = std::chrono::steady_clock::now() + retry_for_;
  notice_("hearth: the broker at " + endpoint_ + " does not answer; retrying for up to " +
          std::to_string(retry_for_.count()) + " s\n");
}

bool broker_retry::wait_for_next_try() {
  if (retry_for_.count() <= 0) return false;
  announce();
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline_) return false;
  std::this_thread::sleep_for(
      std::min<std::chrono::steady_clock::duration>(backoff_, deadline_ - now));
  backoff_ = std::min(backoff_ * 2, max_backoff);
  return true;
}

void broker_retry::got_through() {
  if (announced_) notice_("hearth: the broker at " + endpoint_ + " answers again\n");
  announced_ = false;
  backoff_ = first_backoff;
}

}  // namespace hearth::cli
