#include "broker/reply-list.h"

#include <gtest/gtest.h>

namespace hearth::broker {
namespace {

wire::model_summary model(const std::string& name) {
  wire::model_summary m;
  m.name = name;
  return m;
}

TEST(ReplyList, CapsTheCountAndSaysSo) {
  wire::models_reply r;
  reply_list list(r, &wire::models_reply::models);
  for (size_t i = 0; i < reply_max_items + 10; ++i) list.offer(model("m" + std::to_string(i)));
  EXPECT_EQ(r.models.size(), reply_max_items);
  EXPECT_EQ(list.total(), reply_max_items + 10);
  EXPECT_TRUE(list.truncated());
}

TEST(ReplyList, CapsTheBytesAndTheReplyFitsAMessage) {
  wire::models_reply r;
  reply_list list(r, &wire::models_reply::models);
  const std::string big(600 << 10, 'x');  // 600 KiB names: 6 fit in 4 MiB
  for (int i = 0; i < 10; ++i) list.offer(model(big + std::to_string(i)));
  list.offer(model("small"));  // fits after the big ones no longer do
  EXPECT_EQ(r.models.size(), 7u);
  EXPECT_EQ(r.models.back().name, "small");
  EXPECT_EQ(list.total(), 11u);
  EXPECT_TRUE(list.truncated());
  const std::string body = wire::encode(r);
  EXPECT_LE(body.size(), reply_max_bytes);
  EXPECT_TRUE(wire::decode<wire::models_reply>(body));
}

TEST(ReplyList, AnUncappedListIsWhole) {
  wire::nodes_reply r;
  reply_list list(r, &wire::nodes_reply::nodes);
  for (int i = 0; i < 3; ++i) list.offer(wire::node_summary{});
  EXPECT_EQ(r.nodes.size(), 3u);
  EXPECT_EQ(list.total(), 3u);
  EXPECT_FALSE(list.truncated());
}

}  // namespace
}  // namespace hearth::broker
