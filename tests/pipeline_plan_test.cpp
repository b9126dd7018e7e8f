// The broker planning split models again as nodes come and go (issue 55, broker/pipelines.h): a
// stage whose node left with no spare to take its layers, a node that can now hold the model
// whole, nodes that now hold it in fewer stages. A real broker process with auth; the nodes are
// fake (tests/fake-node.h): they advertise a model's layout and a memory limit, and show the
// stage_assign, stage_release, job_assign and job_cancel the broker sends them. What the stages
// compute is pipeline_cluster's (real nodes); here only who is told to hold what.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster.h"
#include "tests/fake-node.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::fake_node;
using testing::test_client;

constexpr uint64_t MiB = uint64_t(1) << 20;

// "big": eight layers of 100 MiB; about 865 MiB whole with its cache, scratch and logits.
wire::model_info big_model() {
  wire::model_info m;
  m.name = "big";
  m.architecture = "llama";
  m.loaded = false;
  m.layout.layer_bytes.assign(8, 100 * MiB);
  m.layout.input_bytes = 20 * MiB;
  m.layout.output_bytes = 20 * MiB;
  m.layout.kv_bytes_per_layer = 2 * MiB;
  m.layout.scratch_bytes = 8 * MiB;
  m.layout.logits_bytes = 1 * MiB;
  m.layout.whole_bytes = 800 * MiB + 20 * MiB + 20 * MiB + 16 * MiB + 8 * MiB + 1 * MiB;
  return m;
}

class pipeline_plan_test : public ::testing::Test {
 protected:
  void SetUp() override {
    // Fake nodes heartbeat only while they wait for a message: a node is dead after 20 s here.
    c_.broker_settings({{"liveness", "100"}});
    broker_ = c_.start_broker();
    admin_ = c_.client("admin");
  }

  // A fake node serving "big" that offers `limit` bytes, with a stage socket, and one slot of
  // credit. (Layers weigh 102 MiB with their cache; every stage 8 MiB more, the first 20, the
  // last 21.)
  fake_node& node(const std::string& name, uint64_t limit) {
    auto n = std::make_unique<fake_node>(c_, name);
    wire::node_hello h = testing::plain_hello(name, {big_model()});
    h.hardware.memory_limit = limit;
    h.stage_port = 7713;
    h.transfer_key = c_.client_keys("node", name).own.public_key;
    n->send(h);
    EXPECT_TRUE(n->welcomed()) << name << "\n" << broker_.log();
    n->send(wire::node_pull{1});
    fake_node& added = *n;
    nodes_[name] = std::move(n);
    return added;
  }

  uint64_t submit() {
    auto a = admin_->request<wire::accepted>(testing::greedy_job("big", "Once upon a time", 8));
    EXPECT_TRUE(a) << broker_.log();
    return a ? a->job_id : 0;
  }

  // The stages `hearth models` lists for "big", as "n1 [0, 4)" each.
  std::vector<std::string> stages() {
    std::vector<std::string> out;
    auto r = admin_->request<wire::models_reply>(wire::list_models{});
    if (!r) return out;
    for (const auto& m : r->models) {
      if (m.name != "big") continue;
      for (const auto& s : m.stages)
        out.push_back(s.node + " [" + std::to_string(s.first) + ", " + std::to_string(s.end) + ")");
    }
    return out;
  }
  std::string stages_text() {
    std::string t;
    for (const auto& s : stages()) t += s + "; ";
    return t;
  }

  // The job's history, one event per line ("event node detail").
  std::string history(uint64_t job_id) {
    auto r = admin_->request<wire::job_reply>(wire::get_job{0, job_id});
    std::string t;
    if (r) {
      for (const auto& e : r->job.events) t += e.event + " " + e.node + " " + e.detail + "\n";
    }
    return t;
  }

  // Runs the job the node was given to completion (no tokens), and asks for another.
  static void complete(fake_node& n, const wire::job_assign& a) {
    n.send(wire::job_started{a.job_id, a.attempt, 1});
    n.complete(a, 0);
    n.send(wire::node_pull{1});
  }

  testing::cluster c_;
  testing::process broker_;
  std::unique_ptr<test_client> admin_;
  std::map<std::string, std::unique_ptr<fake_node>> nodes_;
};

TEST_F(pipeline_plan_test, a_stage_no_spare_can_take_is_planned_again_over_the_nodes_left) {
  // n1 and n2 hold it in two stages; n3 and n4 are too small to take either half (nor, with
  // n2, the other), but the three nodes left when n1 goes hold it in three.
  fake_node& n1 = node("n1", 600 * MiB);
  fake_node& n2 = node("n2", 600 * MiB);
  node("n3", 250 * MiB);
  node("n4", 250 * MiB);
  const uint64_t job = submit();
  ASSERT_TRUE(testing::wait_until([&] { return stages().size() == 2; })) << broker_.log();
  const auto two = stages();
  EXPECT_EQ(two[0].substr(0, 3), "n1 ") << stages_text();
  EXPECT_EQ(two[1].substr(0, 3), "n2 ") << stages_text();
  auto first = n2.next<wire::job_assign>();
  ASSERT_TRUE(first) << broker_.log();
  EXPECT_EQ(first->job_id, job);
  EXPECT_NE(first->pipeline_id, 0u);

  n1.bye();
  // The driver's stage is released and its attempt taken back; the job runs on a new pipeline.
  auto released = n2.next<wire::stage_release>();
  ASSERT_TRUE(released) << broker_.log();
  EXPECT_EQ(released->pipeline_id, first->pipeline_id);
  auto cancel = n2.next<wire::job_cancel>();
  ASSERT_TRUE(cancel) << broker_.log();
  EXPECT_EQ(cancel->job_id, job);
  n2.send(wire::node_pull{1});
  ASSERT_TRUE(testing::wait_until([&] { return stages().size() == 3; })) << broker_.log();
  const auto now = stages();
  for (const std::string& s : now) EXPECT_EQ(s.find("n1 "), std::string::npos) << stages_text();
  const std::string driver = now.back().substr(0, now.back().find(' '));
  auto second = nodes_.at(driver)->next<wire::job_assign>();
  ASSERT_TRUE(second) << broker_.log();
  EXPECT_EQ(second->job_id, job);
  EXPECT_EQ(second->attempt, first->attempt + 1);
  EXPECT_NE(second->pipeline_id, first->pipeline_id);
  const std::string h = history(job);
  EXPECT_NE(h.find("is planned again: node n1 (layers [0, "), std::string::npos) << h;
  EXPECT_NE(h.find(") is offline and no spare node can take its layers"), std::string::npos) << h;
  complete(*nodes_.at(driver), *second);
  const auto done = admin_->wait_final(job, 20s);
  ASSERT_TRUE(done) << broker_.log();
  EXPECT_EQ(done->summary.state, wire::job_state::completed) << h;
}

TEST_F(pipeline_plan_test, a_node_that_holds_the_model_whole_takes_it_once_the_pipeline_is_idle) {
  fake_node& n1 = node("n1", 600 * MiB);
  fake_node& n2 = node("n2", 600 * MiB);
  const uint64_t job1 = submit();
  auto a1 = n2.next<wire::job_assign>();
  ASSERT_TRUE(a1) << broker_.log();
  ASSERT_EQ(a1->job_id, job1);

  // A node that holds it whole comes while job 1 runs on the pipeline: the pipeline stays.
  fake_node& big = node("big-desk", 2048 * MiB);
  const uint64_t job2 = submit();
  EXPECT_FALSE(n2.next<wire::job_cancel>(1s));
  EXPECT_EQ(stages().size(), 2u);

  // Once job 1 is done, the pipeline is let go and job 2 runs whole.
  complete(n2, *a1);
  auto released1 = n1.next<wire::stage_release>();
  ASSERT_TRUE(released1) << broker_.log();
  EXPECT_EQ(released1->pipeline_id, a1->pipeline_id);
  auto a2 = big.next<wire::job_assign>();
  ASSERT_TRUE(a2) << broker_.log();
  EXPECT_EQ(a2->job_id, job2);
  EXPECT_EQ(a2->pipeline_id, 0u);
  EXPECT_TRUE(stages().empty()) << stages_text();
  EXPECT_NE(broker_.log().find("is dissolved: node big-desk can hold it whole"), std::string::npos)
      << broker_.log();
}

TEST_F(pipeline_plan_test, nodes_that_hold_it_in_fewer_stages_take_it_once_the_pipeline_is_idle) {
  // Three stages of at most three layers each; with n4, two.
  fake_node& n1 = node("n1", 350 * MiB);
  node("n2", 350 * MiB);
  node("n3", 350 * MiB);
  const uint64_t job1 = submit();
  ASSERT_TRUE(testing::wait_until([&] { return stages().size() == 3; })) << broker_.log();
  const auto three = stages();
  const std::string driver = three.back().substr(0, three.back().find(' '));
  auto a1 = nodes_.at(driver)->next<wire::job_assign>();
  ASSERT_TRUE(a1) << broker_.log();
  complete(*nodes_.at(driver), *a1);
  const auto done = admin_->wait_final(job1, 20s);
  ASSERT_TRUE(done) << broker_.log();
  ASSERT_EQ(done->summary.state, wire::job_state::completed);

  // A larger node joins: with it two stages hold the model. The next dispatch a second after the
  // plan finds it.
  node("n4", 600 * MiB);
  std::this_thread::sleep_for(1100ms);
  submit();
  ASSERT_TRUE(testing::wait_until([&] { return stages().size() == 2; })) << broker_.log();
  EXPECT_TRUE(n1.next<wire::stage_release>()) << broker_.log();
  EXPECT_NE(broker_.log().find("the nodes online hold it in 2 stages, not 3"), std::string::npos)
      << broker_.log();
}

TEST_F(pipeline_plan_test, an_admins_split_without_a_spare_is_planned_by_the_broker) {
  fake_node& n1 = node("n1", 2048 * MiB);
  fake_node& n2 = node("n2", 2048 * MiB);
  std::string error;
  ASSERT_TRUE(
      admin_->request<wire::ok>(wire::place_model{0, "big", "", false, {"n1", "n2"}}, &error))
      << error;
  const uint64_t job = submit();
  auto a1 = n2.next<wire::job_assign>();
  ASSERT_TRUE(a1) << broker_.log();
  EXPECT_NE(a1->pipeline_id, 0u);
  // n1 leaves: n2 alone holds the model whole, and runs the job so.
  n1.bye();
  ASSERT_TRUE(n2.next<wire::job_cancel>()) << broker_.log();
  n2.send(wire::node_pull{1});
  auto a2 = n2.next<wire::job_assign>();
  ASSERT_TRUE(a2) << broker_.log();
  EXPECT_EQ(a2->job_id, job);
  EXPECT_EQ(a2->pipeline_id, 0u);
  EXPECT_TRUE(stages().empty()) << stages_text();
}

}  // namespace
}  // namespace hearth
