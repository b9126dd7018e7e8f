#include "broker/token-bucket.h"

#include <gtest/gtest.h>

namespace hearth::broker {
namespace {

using namespace std::chrono_literals;

TEST(TokenBucket, AllowsTheBurstThenTheRate) {
  const auto t0 = token_bucket::clock::now();
  token_bucket b(5, 10, t0);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(b.take(t0)) << i;
  EXPECT_FALSE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 100ms)) << "half a token";
  EXPECT_TRUE(b.take(t0 + 200ms));
  EXPECT_FALSE(b.take(t0 + 200ms));
  // A second refills five, never more than the burst.
  int taken = 0;
  while (b.take(t0 + 1200ms)) ++taken;
  EXPECT_EQ(taken, 5);
  EXPECT_FALSE(b.full(t0 + 2000ms));
  EXPECT_TRUE(b.full(t0 + 1h));
  taken = 0;
  while (b.take(t0 + 1h)) ++taken;
  EXPECT_EQ(taken, 10);
}

TEST(TokenBucket, TimeGoingBackwardsTakesNothing) {
  const auto t0 = token_bucket::clock::now();
  token_bucket b(1, 1, t0);
  EXPECT_TRUE(b.take(t0));
  EXPECT_FALSE(b.take(t0 - 10s));
  EXPECT_FALSE(b.take(t0));
  EXPECT_TRUE(b.take(t0 + 1s));
}

}  // namespace
}  // namespace hearth::broker
