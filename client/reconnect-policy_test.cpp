// The schedule of tries, fed times directly (no clock read, no sleeping).
#include "client/reconnect-policy.h"

#include <gtest/gtest.h>

namespace hearth::client {
namespace {

using namespace std::chrono_literals;
using clock = reconnect_policy::clock;

TEST(ReconnectPolicy, StepsDoubleUpToTheMostWithinTheWindow) {
  const clock::time_point t0{};
  reconnect_policy w(reconnect_policy::request_steps, 60s);
  EXPECT_FALSE(w.is_lost());
  EXPECT_FALSE(w.window_passed(t0 + 1h));
  EXPECT_EQ(w.next_wait(t0), clock::duration(250ms));  // the window starts here
  EXPECT_TRUE(w.is_lost());
  EXPECT_EQ(w.next_wait(t0 + 1s), clock::duration(500ms));
  EXPECT_EQ(w.next_wait(t0 + 2s), clock::duration(1000ms));
  EXPECT_EQ(w.next_wait(t0 + 3s), clock::duration(2000ms));
  EXPECT_EQ(w.next_wait(t0 + 5s), clock::duration(4000ms));
  EXPECT_EQ(w.next_wait(t0 + 9s), clock::duration(5000ms));
  EXPECT_EQ(w.next_wait(t0 + 14s), clock::duration(5000ms));
  // The last wait ends with the window; after it, none.
  EXPECT_EQ(w.next_wait(t0 + 58s), clock::duration(2s));
  EXPECT_FALSE(w.window_passed(t0 + 60s));
  EXPECT_TRUE(w.window_passed(t0 + 61s));
  EXPECT_FALSE(w.next_wait(t0 + 60s));
}

TEST(ReconnectPolicy, AnEarlierEndClipsTheWait) {
  const clock::time_point t0{};
  reconnect_policy w(reconnect_policy::request_steps, 60s);
  w.lost(t0);
  // A broker never reached: the start window ends first.
  const auto until = t0 + reconnect_policy::start_window;
  EXPECT_EQ(w.next_wait(t0 + 9900ms, until), clock::duration(100ms));
  EXPECT_FALSE(w.next_wait(t0 + 10s, until));
}

TEST(ReconnectPolicy, RecoveringStartsAfresh) {
  const clock::time_point t0{};
  reconnect_policy w(reconnect_policy::handshake_steps, clock::duration::max());
  w.lost(t0);
  w.lost(t0 + 5s);  // still the first loss
  EXPECT_EQ(w.next_wait(t0 + 1s), clock::duration(250ms));
  EXPECT_EQ(w.next_wait(t0 + 2s), clock::duration(500ms));
  EXPECT_EQ(w.next_wait(t0 + 3s), clock::duration(1000ms));
  EXPECT_EQ(w.next_wait(t0 + 4s), clock::duration(2000ms));
  EXPECT_EQ(w.next_wait(t0 + 1000h), clock::duration(2000ms));  // for ever
  EXPECT_FALSE(w.window_passed(t0 + 1000h));
  w.recovered();
  EXPECT_FALSE(w.is_lost());
  EXPECT_EQ(w.next_wait(t0 + 2000h), clock::duration(250ms));

  reconnect_policy job(reconnect_policy::request_steps, reconnect_policy::retry_for);
  job.lost(t0);
  EXPECT_TRUE(job.window_passed(t0 + reconnect_policy::retry_for + 1s));
  job.recovered();
  EXPECT_FALSE(job.window_passed(t0 + reconnect_policy::retry_for + 1s));
}

}  // namespace
}  // namespace hearth::client
