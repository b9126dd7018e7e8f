// Broker restarts cost no attempts (issue 16): real hearth-broker and hearth-node processes, the
// broker killed with SIGKILL and started again on the same database and port. The node resumes
// each attempt from the broker's stored token count (job_resume), and holds an attempt that
// finished while the broker was down until the broker asks for it.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "schema/codec.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::cluster;
using testing::fake_node;
using testing::nodes_online;
using testing::test_client;
using testing::wait_until;

// The null engine's text depends only on (prompt, seed, index): the same job gives the same
// output on every run, so a fixed seed gives the reference output.
wire::submit seeded_job(const std::string& prompt, int32_t max_tokens) {
  auto s = testing::greedy_job("alpha", prompt, max_tokens);
  s.params.seed = 4242;
  return s;
}

uint32_t n_gen_of(test_client& c, uint64_t job_id) {
  auto d = c.request<wire::job_reply>(wire::get_job{0, job_id});
  return d ? d->job.summary.n_gen : 0;
}

std::vector<std::string> events_of(const wire::job_detail& d) {
  std::vector<std::string> out;
  for (const auto& e : d.events) out.push_back(e.event);
  return out;
}

class broker_restart_test : public ::testing::Test {
 protected:
  // The output the job gives when nothing goes wrong, from a broker and node of its own.
  std::string reference_output(const wire::submit& s) {
    cluster ref;
    auto broker = ref.start_broker();
    auto node =
        ref.start_node("ref", ref.models("m", {"alpha"}), "null", 1, {"--null-tokens-per-s", "0"});
    auto client = ref.client();
    if (!nodes_online(*client, 1)) return "no reference: the node did not come online";
    auto acc = client->request<wire::accepted>(s);
    if (!acc) return "no reference: the submit failed";
    auto d = client->wait_final(acc->job_id);
    if (!d || d->summary.state != wire::job_state::completed) return "no reference";
    return d->output;
  }

  // A broker, one null-engine node streaming 100 tokens a second, and the job `s` submitted;
  // returns its id (0 after a failed assertion).
  uint64_t start(const wire::submit& s) {
    broker_ = c_.start_broker();
    node_ = c_.start_node("steady", c_.models("m", {"alpha"}), "null", 1,
                          {"--null-tokens-per-s", "100"});
    client_ = c_.client();
    EXPECT_TRUE(nodes_online(*client_, 1)) << broker_.log() << node_.log();
    auto acc = client_->request<wire::accepted>(s);
    EXPECT_TRUE(acc);
    return acc ? acc->job_id : 0;
  }

  // A broker, the fake node (one slot of model alpha) welcomed with one credit, and a 12-token
  // job assigned to it and started; the assignment (nullopt after a failed assertion).
  std::optional<wire::job_assign> stream_to(fake_node& node) {
    node.hello(1, {"alpha"});
    broker_ = c_.start_broker();
    EXPECT_TRUE(node.next<wire::node_welcome>());
    node.send(wire::node_pull{1});
    client_ = c_.client();
    EXPECT_TRUE(client_->request<wire::accepted>(testing::greedy_job("alpha", "gap", 12)));
    auto a = node.next<wire::job_assign>();
    EXPECT_TRUE(a);
    if (a) node.send(wire::job_started{a->job_id, a->attempt, 1});
    return a;
  }

  // The job ran once, on one attempt, and its output is the reference's.
  void expect_completed_once(uint64_t id, uint32_t n_gen, const std::string& expected) {
    auto d = client_->wait_final(id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error;
    EXPECT_EQ(d->summary.attempts, 1u) << broker_.log();
    EXPECT_EQ(d->summary.n_gen, n_gen);
    EXPECT_EQ(d->output, expected);
    EXPECT_EQ(events_of(*d),
              (std::vector<std::string>{"queued", "assigned", "started", "completed"}))
        << "assigned once, never requeued";
  }

  void restart_broker() {
    broker_.signal(SIGKILL);
    ASSERT_EQ(broker_.wait(), 128 + SIGKILL);
    broker_ = c_.start_broker();
    client_ = c_.client();
  }

  cluster c_;
  testing::process broker_;
  testing::process node_;
  std::unique_ptr<test_client> client_;
};

TEST_F(broker_restart_test, three_broker_kills_during_a_job_cost_no_attempt_and_no_output) {
  const auto s = seeded_job("three restarts", 600);
  const std::string expected = reference_output(s);
  // 600 tokens at 100 a second: six seconds of streaming for three restarts.
  const uint64_t id = start(s);
  ASSERT_NE(id, 0u);
  uint32_t seen = 0;
  for (int kill = 0; kill < 3; ++kill) {
    // Kill it only once the stream has advanced since the last restart (stored tokens).
    ASSERT_TRUE(wait_until([&] { return n_gen_of(*client_, id) >= seen + 30; }))
        << "the stream did not advance after restart " << kill << "\n"
        << broker_.log() << node_.log();
    seen = n_gen_of(*client_, id);
    ASSERT_LT(seen, 600u) << "the job ended before the broker was killed " << kill + 1 << " times";
    restart_broker();
  }
  expect_completed_once(id, 600, expected);
  EXPECT_TRUE(node_.running());
}

TEST_F(broker_restart_test, a_job_finished_while_the_broker_was_down_is_not_run_again) {
  const auto s = seeded_job("finished in the dark", 300);
  const std::string expected = reference_output(s);
  const uint64_t id = start(s);
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(wait_until([&] { return n_gen_of(*client_, id) >= 20; }));
  broker_.signal(SIGKILL);
  ASSERT_EQ(broker_.wait(), 128 + SIGKILL);
  // The node finishes the job with nobody to tell (its final and the stream's end are lost),
  // and goes on reconnecting with backoff. The broker comes back while the node waits out a
  // backoff (4 s) longer than the broker's liveness (1 s).
  const std::string done = "job " + std::to_string(id) + " attempt 1: completed";
  ASSERT_TRUE(wait_until([&] { return node_.log().find(done) != std::string::npos; }))
      << node_.log();
  ASSERT_TRUE(wait_until([&] {
    return node_.log().find("reconnecting in 4000 ms") != std::string::npos;
  })) << node_.log();
  broker_ = c_.start_broker();
  client_ = c_.client();
  expect_completed_once(id, 300, expected);
}

TEST_F(broker_restart_test, a_gap_in_a_stream_is_filled_by_job_resume) {
  fake_node node(c_, "gappy");
  const auto a = stream_to(node);
  ASSERT_TRUE(a);
  node.send(wire::job_tokens{a->job_id, a->attempt, 0, 4, "a b c d "});
  // Tokens 4..7 were lost on the way: the broker asks for the stream again from token 4.
  node.send(wire::job_tokens{a->job_id, a->attempt, 8, 4, "i j k l "});
  auto r = node.next<wire::job_resume>();
  ASSERT_TRUE(r) << broker_.log();
  EXPECT_EQ(r->job_id, a->job_id);
  EXPECT_EQ(r->attempt, a->attempt);
  EXPECT_EQ(r->seq, 4u);
  node.send(wire::job_tokens{a->job_id, a->attempt, 4, 8, "e f g h i j k l "});
  node.send(wire::job_final{.job_id = a->job_id,
                            .attempt = a->attempt,
                            .stop_reason = "max_tokens",
                            .n_prompt = 1,
                            .n_gen = 12});
  expect_completed_once(a->job_id, 12, "a b c d e f g h i j k l ");
}

TEST_F(broker_restart_test, a_gap_job_resume_cannot_fill_ends_the_attempt) {
  fake_node node(c_, "deaf");
  const auto a = stream_to(node);
  ASSERT_TRUE(a);
  node.send(wire::job_tokens{a->job_id, a->attempt, 4, 4, "e f g h "});
  // The node never sends tokens 0..3: the broker asks five times, then gives the attempt up.
  auto cancel = node.next<wire::job_cancel>(30s);
  ASSERT_TRUE(cancel) << broker_.log();
  EXPECT_EQ(cancel->job_id, a->job_id);
  EXPECT_EQ(node.resumes, 5u);
  ASSERT_TRUE(wait_until([&] {
    auto d = client_->request<wire::job_reply>(wire::get_job{0, a->job_id});
    return d && d->job.summary.state == wire::job_state::queued;
  })) << "the job is queued again";
}

TEST_F(broker_restart_test, an_assignment_the_restart_lost_costs_no_attempt) {
  // One attempt allowed, one node: a loss counted against the job would fail it.
  c_.broker_settings({{"max_attempts", "1"}});
  fake_node node(c_, "late");
  const auto a = stream_to(node);
  ASSERT_TRUE(a);
  // The broker dies after committing the assignment; the node comes back without the job, as a
  // node whose job_assign died with the broker would.
  restart_broker();
  node.hello(1, {"alpha"});
  ASSERT_TRUE(node.next<wire::node_welcome>()) << broker_.log();
  node.send(wire::node_pull{1});
  auto again = node.next<wire::job_assign>();
  ASSERT_TRUE(again) << broker_.log();
  EXPECT_EQ(again->job_id, a->job_id);
  EXPECT_EQ(again->attempt, a->attempt + 1);
  node.send(wire::job_started{again->job_id, again->attempt, 1});
  node.send(wire::job_tokens{again->job_id, again->attempt, 0, 2, "a b "});
  node.send(wire::job_final{.job_id = again->job_id,
                            .attempt = again->attempt,
                            .stop_reason = "max_tokens",
                            .n_prompt = 1,
                            .n_gen = 2});
  auto d = client_->wait_final(a->job_id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error << broker_.log();
  EXPECT_EQ(d->output, "a b ");
}

// Issue 56: a chat job with tool calls, a tool message and every api_params field is handed to a
// node the same after the broker restarts (from its database), and its n choices may stream up to
// max_tokens each.
TEST_F(broker_restart_test, an_api_job_is_assigned_the_same_after_a_restart) {
  fake_node node(c_, "tools");
  node.hello(2, {"alpha"});  // two slots: the job's two choices run on one node
  broker_ = c_.start_broker();
  ASSERT_TRUE(node.next<wire::node_welcome>());
  node.send(wire::node_pull{1});
  client_ = c_.client();
  wire::submit s = testing::greedy_job("alpha", "", 4);
  s.params.chat_template = "chatml";  // the fake node advertises none
  s.messages = {{"user", "weather in Oslo?"}};
  wire::chat_message call;
  call.role = "assistant";
  call.reasoning_content = "A tool knows.";
  call.tool_calls = {{"call_1", "get_weather", R"({"city": "Oslo"})"}};
  wire::chat_message result;
  result.role = "tool";
  result.name = "get_weather";
  result.tool_call_id = "call_1";
  result.content = "snow";
  s.messages.push_back(call);
  s.messages.push_back(result);
  wire::api_params& api = s.params.api;
  api.tools = R"([{"type":"function","function":{"name":"get_weather","parameters":{}}}])";
  api.tool_choice = "function:get_weather";
  api.parallel_tool_calls = false;
  api.template_kwargs = R"({"k": [1, 2]})";
  api.grammar = "root ::= \"x\"";
  api.logprobs = true;
  api.top_logprobs = 3;
  api.n = 2;
  api.logit_bias = {{5, -100}, {6, 1.5f}};
  api.events = true;
  ASSERT_TRUE(client_->request<wire::accepted>(s)) << broker_.log();
  auto a = node.next<wire::job_assign>();
  ASSERT_TRUE(a) << broker_.log();
  EXPECT_EQ(wire::encode(wire::submit{.messages = a->messages}),
            wire::encode(wire::submit{.messages = s.messages}));
  EXPECT_EQ(a->params.api.tools, api.tools);
  EXPECT_EQ(a->params.api.n, 2);

  restart_broker();
  node.hello(2, {"alpha"});  // without the job: it is assigned again, from the database
  ASSERT_TRUE(node.next<wire::node_welcome>()) << broker_.log();
  node.send(wire::node_pull{1});
  auto again = node.next<wire::job_assign>();
  ASSERT_TRUE(again) << broker_.log();
  EXPECT_EQ(again->attempt, a->attempt + 1);
  wire::job_assign first = *a;
  first.attempt = again->attempt;
  EXPECT_EQ(wire::encode(*again), wire::encode(first)) << "the same job, params and messages";

  // Two choices of max_tokens 4: 8 tokens are the job's, not a faulty node's.
  node.send(wire::job_started{again->job_id, again->attempt, 1});
  const std::string out = "{\"content\":\"a\"}\n{\"i\":1,\"content\":\"b\"}\n";
  node.send(wire::job_tokens{again->job_id, again->attempt, 0, 8, out});
  node.send(wire::job_final{.job_id = again->job_id,
                            .attempt = again->attempt,
                            .stop_reason = "max_tokens",
                            .n_prompt = 1,
                            .n_gen = 8});
  auto d = client_->wait_final(a->job_id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error << broker_.log();
  EXPECT_EQ(d->output, out);
  EXPECT_EQ(d->params.api.logit_bias.size(), 2u);  // get_job shows them too (hearth job --json)
}

}  // namespace
}  // namespace hearth
