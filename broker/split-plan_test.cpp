// The split planner (split-plan.h): fewest stages, the fastest memory filled first, the ends'
// tensors where they belong, deterministic ties, and refusals that say how much is missing.
#include "broker/split-plan.h"

#include <gtest/gtest.h>

namespace hearth::broker {
namespace {

constexpr uint64_t MiB = 1ull << 20;

// n_layer layers of `layer` MiB, 10 MiB of embeddings and of head, 1 MiB of cache per layer,
// 4 MiB of overhead per stage.
split_model model_of(int32_t n_layer, uint64_t layer = 100) {
  split_model m;
  m.layer_bytes.assign(size_t(n_layer), layer * MiB);
  m.input_bytes = 10 * MiB;
  m.output_bytes = 10 * MiB;
  m.kv_bytes_per_layer = 1 * MiB;
  m.stage_overhead = 4 * MiB;
  return m;
}

uint64_t total_of(const split_model& m, size_t stages) {
  uint64_t t = m.input_bytes + m.output_bytes + m.stage_overhead * stages;
  for (uint64_t b : m.layer_bytes) t += b + m.kv_bytes_per_layer;
  return t;
}

void expect_covers(const split_plan& p, const split_model& m) {
  ASSERT_TRUE(p.ok()) << p.error;
  int32_t at = 0;
  for (const auto& s : p.stages) {
    EXPECT_EQ(s.first, at) << s.node;
    EXPECT_GT(s.end, s.first) << s.node;
    at = s.end;
  }
  EXPECT_EQ(at, int32_t(m.layer_bytes.size()));
}

TEST(split_plan, a_model_one_node_holds_gets_one_stage_on_the_fastest_that_holds_it) {
  const auto m = model_of(8);
  const uint64_t whole = total_of(m, 1);
  const auto p = plan_split(m, {{"slow", whole, 5e9}, {"fast", whole, 20e9}, {"tiny", 1, 99e9}});
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].node, "fast");
  EXPECT_EQ(p.stages[0].bytes, whole);
}

TEST(split_plan, the_fewest_stages_then_the_fastest_memory_filled_first) {
  const auto m = model_of(10);  // 1,010 MiB of layers and cache, 20 of ends, 4 per stage
  // No node holds it; two of them together do. "a" is fastest but small: a 2-stage plan of b and
  // c exists, so a 3-stage plan using a is not taken.
  const auto p = plan_split(m, {{"a", 300 * MiB, 40e9},
                                {"b", 700 * MiB, 20e9},
                                {"c", 700 * MiB, 10e9},
                                {"d", 700 * MiB, 5e9}});
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 2u);
  // b and c are the fastest pair that holds it; b, faster, is first and fills up: 6 layers of
  // 101 MiB and the embeddings and overhead (620 of 700), c the other 4 and the head.
  EXPECT_EQ(p.stages[0].node, "b");
  EXPECT_EQ(p.stages[0].end, 6);
  EXPECT_EQ(p.stages[0].bytes, (10 + 4 + 6 * 101) * MiB);
  EXPECT_EQ(p.stages[1].node, "c");
  EXPECT_EQ(p.stages[1].bytes, (10 + 4 + 4 * 101) * MiB);
  EXPECT_NEAR(p.seconds_per_token, double(620 * MiB) / 20e9 + double(418 * MiB) / 10e9, 1e-12);
}

TEST(split_plan, three_stages_when_two_cannot) {
  const auto m = model_of(6);
  // No two of these hold it with its ends: three are needed, fastest first, each filled.
  const auto p =
      plan_split(m, {{"big", 400 * MiB, 30e9}, {"x", 220 * MiB, 20e9}, {"y", 220 * MiB, 10e9}}, 8);
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[0].node, "big");
  EXPECT_EQ(p.stages[0].end, 3);  // 14 + 3 x 101 MiB of 400
  EXPECT_EQ(p.stages[1].node, "x");
  EXPECT_EQ(p.stages[1].end, 5);  // 4 + 2 x 101 of 220
  EXPECT_EQ(p.stages[2].node, "y");
  EXPECT_EQ(p.stages[2].bytes, (14 + 101) * MiB);
}

TEST(split_plan, a_stage_leaves_a_layer_for_each_stage_after_it) {
  const auto m = model_of(6);
  // "a" holds every layer and the embeddings (620 MiB) but not the head as well: it takes five
  // and leaves the last layer for "b" with the head.
  const auto p = plan_split(m, {{"a", 620 * MiB, 30e9}, {"b", 120 * MiB, 10e9}});
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].end, 5);
  EXPECT_EQ(p.stages[1].bytes, (14 + 101) * MiB);
}

TEST(split_plan, the_head_must_fit_on_the_last_stage) {
  split_model m = model_of(4);
  m.output_bytes = 150 * MiB;  // a large vocabulary's head
  // Fastest first puts "a" first; the head then goes to "b", which can hold it with one layer.
  const auto p = plan_split(m, {{"a", 500 * MiB, 20e9}, {"b", 300 * MiB, 10e9}});
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[1].node, "b");
  EXPECT_LE(p.stages[1].bytes, 300 * MiB);
}

TEST(split_plan, equal_nodes_are_chosen_by_name_and_the_plan_is_the_same_every_time) {
  const auto m = model_of(8);
  std::vector<split_node> nodes = {
      {"n3", 500 * MiB, 0}, {"n1", 500 * MiB, 0}, {"n2", 500 * MiB, 0}};
  const auto p = plan_split(m, nodes);
  expect_covers(p, m);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].node, "n1");
  EXPECT_EQ(p.stages[1].node, "n2");
  std::swap(nodes[0], nodes[2]);
  const auto q = plan_split(m, nodes);
  ASSERT_EQ(q.stages.size(), 2u);
  EXPECT_EQ(q.stages[0].node, "n1");
  EXPECT_EQ(q.stages[0].end, p.stages[0].end);
}

TEST(split_plan, too_little_memory_is_refused_with_what_is_missing) {
  const auto m = model_of(10);
  const auto p = plan_split(m, {{"a", 300 * MiB, 1e9}, {"b", 300 * MiB, 1e9}});
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.missing, total_of(m, 2) - 600 * MiB);
  EXPECT_NE(p.error.find("missing"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("MiB"), std::string::npos) << p.error;
  // No nodes at all.
  const auto none = plan_split(m, {});
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.missing, total_of(m, 1));
  EXPECT_NE(none.error.find("no online node"), std::string::npos) << none.error;
  // More stages than allowed would be needed.
  std::vector<split_node> small;
  for (int i = 0; i < 10; ++i) small.push_back({"s" + std::to_string(i), 130 * MiB, 1e9});
  EXPECT_TRUE(plan_split(m, small, 10).ok());
  EXPECT_FALSE(plan_split(m, small, 4).ok());
}

TEST(split_plan, enough_memory_in_all_that_whole_layers_cannot_use_is_refused_too) {
  split_model m = model_of(3);
  m.layer_bytes = {500 * MiB, 10 * MiB, 10 * MiB};  // one layer larger than any node
  const auto p =
      plan_split(m, {{"a", 300 * MiB, 1e9}, {"b", 300 * MiB, 1e9}, {"c", 300 * MiB, 1e9}});
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.missing, 501 * MiB);
  EXPECT_NE(p.error.find("do not pack"), std::string::npos) << p.error;
}

TEST(split_plan, many_nodes_are_planned_quickly_among_the_largest) {
  const auto m = model_of(80, 50);  // a 70B-shaped count of layers
  std::vector<split_node> nodes;
  for (int i = 0; i < 40; ++i) {
    nodes.push_back({"n" + std::to_string(i), uint64_t(200 + 37 * (i % 7)) * MiB, 1e9 + i * 1e8});
  }
  const auto p = plan_split(m, nodes, 16);
  expect_covers(p, m);
  EXPECT_LE(p.stages.size(), 16u);
}

}  // namespace
}  // namespace hearth::broker
