#include "schema/codec.h"

#include <gtest/gtest.h>

namespace hearth::wire {
namespace {

TEST(Codec, RoundTripsAJobAssign) {
  job_assign a;
  a.job_id = 42;
  a.attempt = 2;
  a.model = "stories260K";
  a.prompt = "Once upon a time";
  a.messages = {{"user", "hi"}};
  a.params.max_tokens = 7;
  a.params.temperature = 0;
  a.params.seed = 0xFFFFFFFFFFFFFFFFull;
  a.params.stop = {"\n", "The end"};
  auto d = decode<job_assign>(encode(a));
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->job_id, 42u);
  EXPECT_EQ(d->attempt, 2u);
  EXPECT_EQ(d->model, "stories260K");
  EXPECT_EQ(d->messages.size(), 1u);
  EXPECT_EQ(d->params.seed, 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(d->params.stop, a.params.stop);
}

}  // namespace
}  // namespace hearth::wire
