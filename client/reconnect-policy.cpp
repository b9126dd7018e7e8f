#include "client/reconnect-policy.h"

#include <algorithm>

namespace hearth::client {

reconnect_policy::reconnect_policy(backoff_steps steps, clock::duration window)
    : steps_(steps), window_(window), step_(steps.first) {}

void reconnect_policy::lost(clock::time_point now) {
  if (!lost_at_) lost_at_ = now;
}

bool reconnect_policy::window_passed(clock::time_point now) const {
  // A window of max() never passes (and must not overflow the sum).
  return lost_at_ && now - *lost_at_ > window_;
}

std::optional<reconnect_policy::clock::duration> reconnect_policy::next_wait(
    clock::time_point now, clock::time_point until) {
  lost(now);
  clock::duration left = until == clock::time_point::max() ? clock::duration::max() : until - now;
  if (window_ != clock::duration::max()) left = std::min(left, *lost_at_ + window_ - now);
  if (left <= clock::duration::zero()) return std::nullopt;
  const clock::duration wait = std::min<clock::duration>(step_, left);
  step_ = std::min(step_ * 2, steps_.most);
  return wait;
}

void reconnect_policy::recovered() {
  step_ = steps_.first;
  lost_at_.reset();
}

}  // namespace hearth::client
