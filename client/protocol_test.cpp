// Which messages are job events, what a reply answers, and job events decoded.
#include "client/protocol.h"

#include <gtest/gtest.h>

namespace hearth::client {
namespace {

TEST(ClientProtocol, JobEventsAreTheFiveUnaskedMessages) {
  EXPECT_TRUE(is_job_event(wire::command::job_queued));
  EXPECT_TRUE(is_job_event(wire::command::job_tokens));
  EXPECT_TRUE(is_job_event(wire::command::job_done));
  EXPECT_FALSE(is_job_event(wire::command::accepted));
  EXPECT_FALSE(is_job_event(wire::command::error));
  EXPECT_FALSE(is_job_event(wire::command::heartbeat));
}

TEST(ClientProtocol, EveryReplyNamesItsRequest) {
  wire::accepted a;
  a.request_id = 41;
  a.job_id = 9;
  auto id = reply_request_id(wire::encode(a));
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, 41u);
  wire::error_reply e;
  e.request_id = 42;
  e.message = "no";
  id = reply_request_id(wire::encode(e));
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, 42u);
  EXPECT_FALSE(reply_request_id("\xc1"));
}

TEST(ClientProtocol, JobEventsDecodeWithTheirJob) {
  const wire::job_tokens t{5, 1, 0, 2, "ab"};
  auto ev = decode_job_event(wire::command::job_tokens, wire::encode(t));
  ASSERT_TRUE(ev && *ev);
  EXPECT_EQ((*ev)->first, 5u);
  EXPECT_EQ(std::get<wire::job_tokens>((*ev)->second).text, "ab");
  EXPECT_FALSE(decode_job_event(wire::command::ok, wire::encode(wire::ok{})));
  auto bad = decode_job_event(wire::command::job_done, "\xc1");
  ASSERT_TRUE(bad);
  EXPECT_FALSE(*bad);
  EXPECT_NE(bad->message().find("job_done"), std::string::npos);
}

}  // namespace
}  // namespace hearth::client
