// One model split across nodes (issue 55, schema/PROTOCOL.md 17), end to end: hearth-broker and
// three hearth-node processes on loopback with keys (CURVE on the broker's socket and on every
// stage socket), stories260K placed with `split` over two and then three of them, and its
// reference greedy texts run through the pipeline: the tokens the whole model gives on one node,
// which stories260K's reference (llama.cpp) also gives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::nodes_online;
using testing::test_client;

class pipeline_cluster_test : public testing::stories_cluster_test {
 protected:
  void start(size_t n_nodes) {
    broker_ = c_.start_broker();
    const std::string dir = models("m", {"stories260K"});
    for (size_t i = 0; i < n_nodes; ++i)
      nodes_.push_back(c_.start_node("n" + std::to_string(i + 1), dir, "cpu", 2));
    client_ = c_.client();
    admin_ = c_.client("admin");
    ASSERT_TRUE(nodes_online(*client_, n_nodes)) << logs();
  }
  std::string logs() const {
    std::string out = broker_.log();
    for (const auto& n : nodes_) out += "\n--- node ---\n" + n.log();
    return out;
  }
  // place_model with `split`: "" when the broker answered ok, else its error.
  std::string split(const std::vector<std::string>& nodes) {
    wire::place_model m;
    m.name = "stories260K";
    m.split = nodes;
    std::string error;
    return admin_->request<wire::ok>(m, &error) ? "" : error;
  }
  testing::process broker_;
  std::vector<testing::process> nodes_;
  std::unique_ptr<test_client> client_, admin_;
};

TEST_F(pipeline_cluster_test, split_over_two_and_three_nodes_gives_the_whole_models_greedy_text) {
  ASSERT_NO_FATAL_FAILURE(start(3));
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  for (const std::vector<std::string>& plan :
       {std::vector<std::string>{"n1", "n2"}, std::vector<std::string>{"n3", "n1", "n2"}}) {
    ASSERT_EQ(split(plan), "") << logs();
    auto listed = client_->request<wire::models_reply>(wire::list_models{});
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->models.size(), 1u);
    const auto& stages = listed->models[0].stages;
    ASSERT_EQ(stages.size(), plan.size());
    int32_t next = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      EXPECT_EQ(stages[i].node, plan[i]);
      EXPECT_EQ(stages[i].first, next);
      EXPECT_GT(stages[i].end, stages[i].first);
      next = stages[i].end;
    }
    EXPECT_EQ(next, 5) << "stories260K has 5 layers";
    for (const auto& kase : ref["cases"]) {
      testing::greedy_run run;
      ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_text(
          *client_, "stories260K", kase["prompt"], kase["greedy_text"], [&] { return logs(); },
          &run));
      auto detail = client_->wait_final(run.job_id);
      ASSERT_TRUE(detail);
      // The job ran on the pipeline's last stage, which samples and streams.
      EXPECT_EQ(detail->summary.node, plan.back());
      EXPECT_EQ(detail->summary.attempts, 1u);
    }
  }
  // The stages ran on the nodes the plan named: each logged its share.
  for (size_t i = 0; i < nodes_.size(); ++i)
    EXPECT_NE(nodes_[i].log().find("layers ["), std::string::npos) << nodes_[i].log();
}

TEST_F(pipeline_cluster_test, a_split_the_nodes_cannot_hold_is_refused_with_the_reason) {
  ASSERT_NO_FATAL_FAILURE(start(2));
  EXPECT_NE(split({"n1"}).find("at least two nodes"), std::string::npos);
  EXPECT_NE(split({"n1", "nobody"}).find("'nobody' is not online"), std::string::npos);
  EXPECT_NE(split({"n1", "n1"}).find("named twice"), std::string::npos);
  EXPECT_NE(split({"n1", "n2", "n1", "n2", "n1", "n2"}).find("named twice"), std::string::npos);
  // A client key may not place models.
  wire::place_model m;
  m.name = "stories260K";
  m.split = {"n1", "n2"};
  std::string error;
  EXPECT_FALSE(client_->request<wire::ok>(m, &error));
  EXPECT_NE(error.find("unauthorized"), std::string::npos) << error;
}

}  // namespace
}  // namespace hearth
