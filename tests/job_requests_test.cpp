// What the OpenAI API asks of a job, end to end on stories260K with real hearth-broker and
// hearth-node processes: presence and frequency penalties reach the node's sampler, and a request
// at fault (a prompt longer than a slot, chat messages the model cannot format) fails once, with
// the stop_reason hearth-gateway maps to HTTP 400, and is never tried on another node.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using testing::cluster;

constexpr const char* k_model = "stories260K";

class job_requests_test : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(testing::testdata_path("models/stories260K.gguf").empty()); }
  std::string models() { return c_.models("m", {k_model}); }
  // A node config file giving each slot `ctx` tokens.
  std::string ctx_config(int ctx) {
    const std::string path = c_.dir().file("node-ctx.yaml");
    std::ofstream(path) << "ctx_per_slot: " << ctx << "\n";
    return path;
  }
  // A greedy job's text and end.
  testing::test_client::outcome run(testing::test_client& t, wire::submit s) {
    s.watch = true;
    auto acc = t.request<wire::accepted>(s);
    EXPECT_TRUE(acc);
    if (!acc) return {};
    return t.follow(acc->job_id);
  }

  // A job that failed for its request's fault, after its first attempt, saying `why`.
  static void expect_at_fault(const testing::test_client::outcome& r, const std::string& reason,
                              const std::string& why) {
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.done->state, wire::job_state::failed);
    EXPECT_EQ(r.done->stop_reason, reason);
    EXPECT_EQ(r.done->attempt, 1u);
    EXPECT_NE(r.done->error.find(why), std::string::npos) << r.done->error;
  }

  cluster c_;
};

TEST_F(job_requests_test, penalties_change_the_greedy_output_and_stay_deterministic) {
  auto broker = c_.start_broker();
  auto node = c_.start_node("n", models(), "cpu", 2);
  auto client = c_.client();
  ASSERT_TRUE(testing::nodes_online(*client, 1));

  const auto plain_job = testing::greedy_job(k_model, "Once upon a time", 64);
  auto frequency_job = plain_job;
  frequency_job.params.frequency_penalty = 1.0f;
  auto presence_job = plain_job;
  presence_job.params.presence_penalty = 1.0f;

  const auto plain = run(*client, plain_job);
  const auto frequency = run(*client, frequency_job);
  const auto presence = run(*client, presence_job);
  const auto frequency_again = run(*client, frequency_job);
  for (const auto* r : {&plain, &frequency, &presence, &frequency_again}) {
    ASSERT_TRUE(r->done);
    EXPECT_EQ(r->done->state, wire::job_state::completed) << r->done->error;
    EXPECT_FALSE(r->text.empty());
  }
  EXPECT_NE(frequency.text, plain.text);
  EXPECT_NE(presence.text, plain.text);
  EXPECT_EQ(frequency_again.text, frequency.text);
  // The stored parameters say what ran.
  auto admin = c_.client("admin", "root");
  auto jobs = admin->request<wire::jobs_reply>(wire::list_jobs{0, "", "", 10});
  ASSERT_TRUE(jobs);
  ASSERT_EQ(jobs->jobs.size(), 4u);
  auto detail = admin->request<wire::job_reply>(wire::get_job{0, jobs->jobs[1].job_id});
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->job.params.presence_penalty, 1.0f);
  EXPECT_EQ(detail->job.params.frequency_penalty, 0.0f);
}

TEST_F(job_requests_test, a_request_at_fault_fails_once_and_is_not_tried_elsewhere) {
  auto broker = c_.start_broker();
  const std::string config = ctx_config(32);
  const std::string dir = models();
  auto n1 = c_.start_node("n1", dir, "cpu", 1, {"--config", config});
  auto n2 = c_.start_node("n2", dir, "cpu", 1, {"--config", config});
  auto client = c_.client();
  ASSERT_TRUE(testing::nodes_online(*client, 2));

  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Once upon a time there was a little dog. ";
  const auto too_long = run(*client, testing::greedy_job(k_model, long_prompt, 8));
  ASSERT_NO_FATAL_FAILURE(
      expect_at_fault(too_long, "prompt_too_long", "tokens but a slot holds 32"));
  // Both numbers: the prompt's tokens (more than the slot's) and the slot's.
  const std::string& e = too_long.done->error;
  ASSERT_TRUE(e.starts_with("the prompt has ")) << e;
  EXPECT_GT(std::stoi(e.substr(15)), 32) << e;

  // Chat messages for a model without a chat template are refused at submit (the nodes
  // advertise that they have none); a template name only a node can judge fails on the node.
  auto chat = testing::greedy_job(k_model, "", 8);
  chat.messages = {{"user", "hello"}};
  std::string refused;
  EXPECT_FALSE(client->request<wire::accepted>(chat, &refused));
  EXPECT_NE(refused.find("no_chat_template: model '" + std::string(k_model) +
                         "' has no chat template its nodes can use"),
            std::string::npos)
      << refused;
  chat.params.chat_template = "no-such-template";
  const auto no_template = run(*client, chat);
  ASSERT_NO_FATAL_FAILURE(
      expect_at_fault(no_template, "invalid_request", "unknown chat template 'no-such-template'"));

  // One assignment each, in the history too; the nodes are not blamed for them.
  for (uint64_t id : {too_long.done->job_id, no_template.done->job_id}) {
    auto detail = client->request<wire::job_reply>(wire::get_job{0, id});
    ASSERT_TRUE(detail);
    EXPECT_EQ(detail->job.summary.attempts, 1u);
    int assigned = 0;
    for (const auto& ev : detail->job.events) assigned += ev.event == "assigned";
    EXPECT_EQ(assigned, 1) << id;
  }
  auto nodes = client->request<wire::nodes_reply>(wire::list_nodes{});
  ASSERT_TRUE(nodes);
  for (const auto& n : nodes->nodes) EXPECT_EQ(n.lost, 0u) << n.name;
  // A good job still runs on the same nodes.
  const auto fine = run(*client, testing::greedy_job(k_model, "Once upon a time", 4));
  ASSERT_TRUE(fine.done);
  EXPECT_EQ(fine.done->state, wire::job_state::completed);
}

}  // namespace
}  // namespace hearth
