// What one node, or one peer pretending to be nodes, can do to the broker (issues 15, 52): its
// in-flight attempts are capped, attempts it loses (by dying, failing them by its own fault, not
// starting them, stalling, misreporting their tokens) do not fail jobs another node can run and get
// it quarantined, visibly, until it ends or an admin releases it; its self-description does not
// outrank measured behaviour; registrations are rate-limited and counted, per key too; a second
// process cannot take a live node's name; and the lists of nodes and models always fit a message.
// Real broker and node processes on loopback (tests/cluster.h); the fakes are raw sockets speaking
// the node protocol.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "broker/job-store.h"
#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto job = testing::greedy_job;

std::optional<wire::node_summary> node_named(test_client& c, const std::string& name) {
  auto r = c.request<wire::nodes_reply>(wire::list_nodes{});
  if (!r) return std::nullopt;
  for (const auto& n : r->nodes) {
    if (n.name == name) return n;
  }
  return std::nullopt;
}

bool node_online(test_client& c, const std::string& name, bool online = true) {
  return wait_until([&] {
    auto n = node_named(c, name);
    return n && n->online == online;
  });
}

// `hearth ARGS --broker ENDPOINT` with a key of `role`: what it printed on stdout and stderr.
std::string hearth_cli(cluster& c, const std::string& args, const std::string& role = "client") {
  std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c.endpoint();
  for (const auto& a : c.key_args(role, "default")) cmd += " " + a;
  cmd += " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// The detail of every "requeued" event of the job, in order.
std::vector<std::string> requeues_of(test_client& c, uint64_t id) {
  std::vector<std::string> out;
  auto d = c.request<wire::job_reply>(wire::get_job{0, id});
  if (!d) return out;
  for (const auto& e : d->job.events) {
    if (e.event == "requeued") out.push_back(e.detail);
  }
  return out;
}

class nodes_limits_test : public testing::stories_cluster_test {
 protected:
  // The cluster's own broker settings (tests/cluster.cpp) plus the test's.
  void broker_config(const std::string& extra) {
    std::ofstream(c_.dir().file("broker.yaml"))
        << "heartbeat_ms: 200\nliveness: 5\noutput_flush_ms: 50\nqueue_position_ms: 50\n"
           "log_level: debug\n"
        << extra;
  }
  // The job failed after `attempts` attempts, saying so.
  static void expect_gave_up(test_client& client, uint64_t id, uint32_t attempts) {
    auto d = client.wait_final(id, 5s);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::failed);
    EXPECT_EQ(d->summary.attempts, attempts);
    const std::string gave_up = "gave up after " + std::to_string(attempts) + " attempts";
    EXPECT_NE(d->summary.error.find(gave_up), std::string::npos) << d->summary.error;
  }
  // A real node (null engine) serving alpha, online.
  testing::process real_node(test_client& client, int slots, int tokens_per_s) {
    auto p = c_.start_node("real", models("m", {"alpha"}), "null", slots,
                           {"--null-tokens-per-s", std::to_string(tokens_per_s)});
    EXPECT_TRUE(node_online(client, "real")) << p.log();
    return p;
  }
  // Stops the broker (SIGTERM), starts it again on the same database, and lists the nodes.
  std::optional<wire::nodes_reply> restart(testing::process& broker) {
    broker.signal(SIGTERM);
    EXPECT_EQ(broker.wait(), 0);
    broker = c_.start_broker();
    return c_.client("client")->request<wire::nodes_reply>(wire::list_nodes{});
  }
  // A job that keeps a node busy; returns once it runs.
  void occupy(test_client& client, int32_t tokens) {
    auto busy = client.request<wire::accepted>(job("alpha", "long", tokens));
    ASSERT_TRUE(busy);
    ASSERT_TRUE(wait_until([&] {
      auto d = client.request<wire::job_reply>(wire::get_job{0, busy->job_id});
      return d && d->job.summary.state == wire::job_state::running;
    }));
  }
  // A job of `tokens` tokens that `node` (welcomed, given credit) runs: its assignment, once the
  // node has said job_started.
  std::optional<wire::job_assign> started_on(fake_node& node, test_client& client, int32_t tokens) {
    node.hello(1, {"alpha"});
    if (!node.next<wire::node_welcome>()) return std::nullopt;
    node.send(wire::node_pull{1});
    if (!client.request<wire::accepted>(job("alpha", "started", tokens))) return std::nullopt;
    auto a = node.next<wire::job_assign>();
    if (a) node.send(wire::job_started{a->job_id, a->attempt, 1});
    return a;
  }
  std::vector<uint64_t> submit(test_client& client, int n, int32_t tokens) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto acc = client.request<wire::accepted>(job("alpha", "job " + std::to_string(i), tokens));
      EXPECT_TRUE(acc);
      if (acc) ids.push_back(acc->job_id);
    }
    return ids;
  }
};

TEST_F(nodes_limits_test, a_node_claiming_everything_gets_its_capped_slots_then_quarantine) {
  broker_config("max_node_slots: 4\n");
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real = real_node(*client, 2, 100);

  fake_node fake(c_, "fake1");
  fake.hello(1000, {"alpha"});
  ASSERT_TRUE(fake.welcomed());
  fake.send(wire::node_pull{1000});
  ASSERT_TRUE(wait_until([&] {
    auto n = node_named(*client, "fake1");
    return n && n->online;
  }));
  EXPECT_EQ(node_named(*client, "fake1")->slots, 4u) << "1000 declared slots, capped at 4";
  const auto ids = submit(*client, 20, 40);

  // It claims a loaded model, a GPU and 1000 slots: it wins jobs, but never more than 4. Silent
  // (no heartbeat), it is declared dead after a second and loses them.
  auto heard = fake.listen(3s);
  EXPECT_EQ(heard.assigns.size(), 4u);
  ASSERT_TRUE(node_online(*client, "fake1", false));
  auto n = node_named(*client, "fake1");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->lost, 4u);
  EXPECT_GT(n->quarantined_until_ms, net::wall_ms()) << broker.log();
  EXPECT_NE(broker.log().find("node fake1 is quarantined"), std::string::npos);
  EXPECT_NE(hearth_cli(c_, "nodes").find("quarantined"), std::string::npos);

  // Back with the same claims, it still gets nothing while quarantined.
  fake.hello(1000, {"alpha"});
  fake.send(wire::node_pull{1000});
  heard = fake.listen(1500ms);
  EXPECT_EQ(heard.welcomes, 1);
  EXPECT_TRUE(heard.assigns.empty()) << heard.assigns.size() << " jobs went to a quarantined node";

  for (auto id : ids) {
    auto d = client->wait_final(id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error;
    EXPECT_EQ(d->summary.node, "real");
  }
}

TEST_F(nodes_limits_test, fake_nodes_losing_jobs_in_turn_do_not_fail_them) {
  broker_config("max_node_slots: 4\n");
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real = real_node(*client, 1, 20);
  // The real node is busy for 5 s with this one; the fakes take the others in turn meanwhile.
  ASSERT_NO_FATAL_FAILURE(occupy(*client, 100));
  const auto ids = submit(*client, 6, 5);

  for (const std::string name : {"fake1", "fake2", "fake3"}) {
    fake_node fake(c_, name);
    fake.hello(1000, {"alpha"});
    fake.send(wire::node_pull{1000});
    auto heard = fake.listen(5s, [](auto& h) { return h.assigns.size() >= 4; });
    EXPECT_EQ(heard.assigns.size(), 4u) << name;
    ASSERT_TRUE(node_online(*client, name, false)) << name << " never went offline";
  }
  int lost_three_times = 0;
  for (auto id : ids) {
    auto d = client->wait_final(id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error;
    EXPECT_EQ(d->summary.node, "real");
    lost_three_times += d->summary.attempts >= 4;
  }
  // Three losses used to exhaust max_attempts (3): the test shows it no longer does.
  EXPECT_GE(lost_three_times, 1);
}

TEST_F(nodes_limits_test, a_job_lost_by_its_only_node_still_fails_after_max_attempts) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node fake(c_, "flaky");
  fake.hello(1, {"alpha"});
  ASSERT_TRUE(fake.welcomed());
  auto acc = client->request<wire::accepted>(job("alpha", "x", 4));
  ASSERT_TRUE(acc);
  // It takes the job and says hello again without it: no other node could run it, so each loss
  // counts, and the third fails the job.
  EXPECT_EQ(fake.bounce(4), 3) << broker.log();
  expect_gave_up(*client, acc->job_id, 3);
}

TEST_F(nodes_limits_test, forgiven_losses_are_bounded_too) {
  broker_config("max_attempts: 2\n");  // at most 4 x 2 = 8 attempts in all
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real = real_node(*client, 1, 10);
  ASSERT_NO_FATAL_FAILURE(occupy(*client, 100));
  auto acc = client->request<wire::accepted>(job("alpha", "bounced", 4));
  ASSERT_TRUE(acc);
  // Fakes bounce it while the real node (healthy, so the losses are forgiven) is busy; each fake
  // is quarantined after 3 losses and the next one takes over.
  int bounced = 0;
  for (int f = 0; f < 3; ++f) {
    fake_node fake(c_, "bouncer" + std::to_string(f));
    fake.hello(1, {"alpha"});
    bounced += fake.bounce(3);
  }
  EXPECT_EQ(bounced, 8);
  expect_gave_up(*client, acc->job_id, 8);
}

// A failure that is the request's (the node says invalid_request or prompt_too_long) fails the job
// at once; a node's own failure is a lost attempt (tests/broker_attempts_test.cpp).
TEST_F(nodes_limits_test, a_job_its_node_fails_fails_without_blaming_the_node) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node fake(c_, "failing");
  fake.hello(1, {"alpha"});
  ASSERT_TRUE(fake.welcomed());
  fake.send(wire::node_pull{1});
  auto acc = client->request<wire::accepted>(job("alpha", "x", 4));
  ASSERT_TRUE(acc);
  auto heard = fake.listen(5s, [](auto& h) { return !h.assigns.empty(); });
  ASSERT_EQ(heard.assigns.size(), 1u);
  wire::job_final f;
  f.job_id = acc->job_id;
  f.attempt = heard.assigns[0].attempt;
  f.state = wire::job_state::failed;
  f.stop_reason = "invalid_request";
  f.error = "the model cannot take it";
  fake.send(f);
  auto d = client->wait_final(acc->job_id, 5s);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, wire::job_state::failed);
  EXPECT_EQ(d->summary.error, "the model cannot take it");
  EXPECT_EQ(d->summary.attempts, 1u);
  auto n = node_named(*client, "failing");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->lost, 0u) << "a failed job is not a lost attempt";
  EXPECT_EQ(n->quarantined_until_ms, 0);
}

// A node that answers every job_assign with job_final failed (its own error, not the request's)
// no longer fails the jobs: they run on the healthy node, and the failing one is quarantined,
// with the losses and the end shown to `hearth nodes` until an admin releases it. Before: 30 of
// 30 jobs failed on it (it won them by its claims) and it was never quarantined.
TEST_F(nodes_limits_test, a_node_failing_every_job_is_quarantined_and_the_jobs_run_elsewhere) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real =
      c_.start_node("real", c_.models("m", {"alpha"}), "null", 1, {"--null-tokens-per-s", "0"});
  ASSERT_TRUE(testing::nodes_online(*client, 1)) << real.log();

  fake_node failer(c_, "failer");
  std::atomic<int> failed{0};
  // Joined when the test ends, also by a failed assertion.
  std::jthread t([&](std::stop_token stop) {
    failer.serve(4, {"alpha"}, stop, [&](const wire::job_assign& a) {
      wire::job_final f;
      f.job_id = a.job_id;
      f.attempt = a.attempt;
      f.state = wire::job_state::failed;
      // The first error is long: what the broker keeps of it is bounded.
      f.error = failed == 0 ? std::string(100000, 'e') : "the model does not load here";
      failer.send(f);
      failer.send(wire::node_pull{1});
      ++failed;
    });
  });
  ASSERT_TRUE(testing::nodes_online(*client, 2));
  std::vector<uint64_t> ids;
  for (int i = 0; i < 30; ++i) {
    auto acc = client->request<wire::accepted>(job("alpha", "job " + std::to_string(i), 4));
    ASSERT_TRUE(acc);
    ids.push_back(acc->job_id);
  }
  int completed = 0;
  size_t requeued = 0;
  for (auto id : ids) {
    auto d = client->wait_final(id, 30s);
    ASSERT_TRUE(d) << broker.log();
    completed += d->summary.state == wire::job_state::completed;
    EXPECT_EQ(d->summary.node, "real") << d->summary.error;
    for (const auto& why : requeues_of(*client, id)) {
      EXPECT_LE(why.size(), 600u) << why.substr(0, 100);
      ++requeued;
    }
  }
  EXPECT_EQ(requeued, size_t(failed.load()));
  EXPECT_EQ(completed, 30) << failed << " attempts failed on the fake node\n" << broker.log();
  EXPECT_GE(failed.load(), 1);

  auto n = node_named(*client, "failer");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->lost, uint32_t(failed.load()));
  EXPECT_GT(n->quarantined_until_ms, net::wall_ms()) << broker.log();
  ASSERT_FALSE(n->losses.empty());
  EXPECT_EQ(n->losses.back().reason, "node failer failed it: the model does not load here");
  EXPECT_NE(n->losses.back().job_id, 0u);
  EXPECT_GE(n->losses.back().attempt, 1u);

  // Why and until when, in the listing and its JSON.
  const std::string listed = hearth_cli(c_, "nodes");
  EXPECT_NE(listed.find("failer is quarantined until "), std::string::npos) << listed;
  EXPECT_NE(listed.find("node failer failed it: the model does not load here"), std::string::npos)
      << listed;
  const std::string json = hearth_cli(c_, "nodes --json");
  EXPECT_NE(json.find("\"losses\""), std::string::npos) << json;

  // Only an admin may lift it.
  const std::string refused = hearth_cli(c_, "nodes release failer");
  EXPECT_NE(refused.find("release_node needs an admin key"), std::string::npos) << refused;
  EXPECT_GT(node_named(*client, "failer")->quarantined_until_ms, 0);
  const std::string released = hearth_cli(c_, "nodes release failer", "admin");
  EXPECT_NE(released.find("node failer released"), std::string::npos) << released;
  n = node_named(*client, "failer");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->quarantined_until_ms, 0);
  const std::string unknown = hearth_cli(c_, "nodes release nobody", "admin");
  EXPECT_NE(unknown.find("no node nobody"), std::string::npos) << unknown;
  t.request_stop();
  t.join();
}

// A node that takes jobs and never starts them, or starts one and then sends nothing while it
// keeps heartbeating, has them taken back after attempt_start_timeout_ms and
// attempt_stall_timeout_ms; they run elsewhere. Before: held "running" for as long as it lived.
TEST_F(nodes_limits_test, attempts_not_started_or_stalled_are_taken_back) {
  broker_config("attempt_start_timeout_ms: 3000\nattempt_stall_timeout_ms: 1500\n");
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node holder(c_, "holder");
  holder.hello(2, {"alpha"});
  ASSERT_TRUE(holder.next<wire::node_welcome>()) << broker.log();
  holder.send(wire::node_pull{2});
  auto never = client->request<wire::accepted>(job("alpha", "never started", 8));
  ASSERT_TRUE(never);
  auto a1 = holder.next<wire::job_assign>(5s);
  ASSERT_TRUE(a1);
  auto stalled = client->request<wire::accepted>(job("alpha", "started, then nothing", 8));
  ASSERT_TRUE(stalled);
  auto a2 = holder.next<wire::job_assign>(5s);
  ASSERT_TRUE(a2);
  holder.send(wire::job_started{a2->job_id, a2->attempt, 3});
  holder.send(wire::job_tokens{a2->job_id, a2->attempt, 0, 1, "a"});

  // It keeps heartbeating (next() does) and is told to stop both.
  std::set<uint64_t> cancelled;
  for (int i = 0; i < 2; ++i) {
    if (auto c = holder.next<wire::job_cancel>(10s)) cancelled.insert(c->job_id);
  }
  EXPECT_EQ(cancelled, (std::set<uint64_t>{never->job_id, stalled->job_id})) << broker.log();
  EXPECT_EQ(requeues_of(*client, never->job_id),
            std::vector<std::string>{
                "node holder did not start it within 3 s (attempt_start_timeout_ms)"});
  EXPECT_EQ(requeues_of(*client, stalled->job_id),
            std::vector<std::string>{
                "node holder sent nothing of it for 1.5 s (attempt_stall_timeout_ms)"});
  auto n = node_named(*client, "holder");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->lost, 2u);

  // A healthy node runs them.
  auto real =
      c_.start_node("real", c_.models("m", {"alpha"}), "null", 1, {"--null-tokens-per-s", "0"});
  for (auto id : {never->job_id, stalled->job_id}) {
    auto d = client->wait_final(id, 20s);
    ASSERT_TRUE(d) << broker.log();
    EXPECT_EQ(d->summary.state, wire::job_state::completed);
    EXPECT_EQ(d->summary.node, "real");
  }
}

// A job_resume outstanding when the attempt ends (handed back, queued again) is over: its node is
// not asked again, nor blamed for not answering. Before: the broker re-sent it every 2 s (4 more
// times) and then counted a loss the node never had.
TEST_F(nodes_limits_test, a_resume_of_an_attempt_that_ended_is_not_sent_again) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node node(c_, "gappy");
  const auto a = started_on(node, *client, 12);
  ASSERT_TRUE(a) << broker.log();
  node.send(wire::job_tokens{a->job_id, a->attempt, 0, 4, "a b c d "});
  node.send(wire::job_tokens{a->job_id, a->attempt, 8, 4, "i j k l "});  // 4..7 lost
  ASSERT_TRUE(node.next<wire::job_resume>(5s)) << broker.log();
  node.send(wire::job_handback{a->job_id, a->attempt, "going away"});
  ASSERT_TRUE(wait_until([&] { return requeues_of(*client, a->job_id).size() == 1; }));
  const uint32_t before = node.resumes;
  EXPECT_FALSE(node.next<wire::job_resume>(5s)) << "the ended attempt's resume was sent again";
  EXPECT_EQ(node.resumes, before);
  auto n = node_named(*client, "gappy");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->lost, 1u) << "the hand-back, and no more";
}

// A chunk claiming more tokens than the job may have (n_tokens 2^32 - 1) is not taken as the
// job's output: the attempt is cancelled, the job queued again, and the node blamed; the reason
// says the bound. Before: the job counted 4294967295 tokens.
TEST_F(nodes_limits_test, a_chunk_past_max_tokens_is_refused) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node node(c_, "counter");
  const auto a = started_on(node, *client, 8);
  ASSERT_TRUE(a) << broker.log();
  node.send(wire::job_tokens{a->job_id, a->attempt, 0, 2, "a b "});
  node.send(wire::job_tokens{a->job_id, a->attempt, 2, UINT32_MAX, "c"});
  auto c = node.next<wire::job_cancel>(5s);
  ASSERT_TRUE(c) << broker.log();
  EXPECT_EQ(c->job_id, a->job_id);
  EXPECT_EQ(requeues_of(*client, a->job_id),
            std::vector<std::string>{"node counter sent tokens 2..4294967296 of a job of at most 8 "
                                     "tokens (max_tokens)"});
  auto d = client->request<wire::job_reply>(wire::get_job{0, a->job_id});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->job.summary.state, wire::job_state::queued);
  EXPECT_EQ(d->job.summary.n_gen, 0u);
  EXPECT_EQ(node_named(*client, "counter")->lost, 1u);
}

TEST_F(nodes_limits_test, a_node_restarted_with_jobs_handed_back_is_not_quarantined) {
  auto broker = c_.start_broker();
  auto client = c_.client();
  const auto dir = models("m", {"alpha"});
  std::ofstream(c_.dir().file("n.yaml")) << "drain_timeout_ms: 200\n";
  const std::vector<std::string> slow = {"--null-tokens-per-s", "5", "--config",
                                         c_.dir().file("n.yaml")};
  auto node = c_.start_node("desk", dir, "null", 4, slow);
  ASSERT_TRUE(node_online(*client, "desk"));
  const auto ids = submit(*client, 4, 100);
  ASSERT_TRUE(wait_until([&] {
    auto r = client->request<wire::nodes_reply>(wire::list_nodes{});
    return r && !r->nodes.empty() && r->nodes[0].running == 4;
  }));
  // systemctl restart: the node hands back all four at once, and comes back.
  node.signal(SIGTERM);
  ASSERT_EQ(node.wait(10s), 0) << node.log();
  node = c_.start_node("desk", dir, "null", 4, {"--null-tokens-per-s", "0"});
  for (uint64_t id : ids) {
    auto d = client->wait_final(id, 20s);
    ASSERT_TRUE(d) << broker.log();
    EXPECT_EQ(d->summary.state, wire::job_state::completed);
    EXPECT_EQ(d->summary.node, "desk");
  }
  EXPECT_EQ(broker.log().find("quarantined"), std::string::npos) << broker.log();
}

TEST_F(nodes_limits_test, a_hello_flood_from_one_socket_is_rate_limited) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node flood(c_, "flood");
  auto heard = flood.hello_flood(5000, 10s);
  // Burst 10, then 5 a second from one connection.
  EXPECT_GE(heard.welcomes, 10);
  EXPECT_LE(heard.welcomes, 80);
  ASSERT_FALSE(heard.errors.empty());
  EXPECT_EQ(heard.errors[0].code, wire::error_code::limit_reached);
  EXPECT_NE(heard.errors[0].message.find("node_hello per second"), std::string::npos);
  auto r = client->request<wire::nodes_reply>(wire::list_nodes{});
  ASSERT_TRUE(r) << "the broker keeps serving";
  EXPECT_EQ(r->total, r->nodes.size());
  EXPECT_LE(r->total, 256u);
  // Refusals are logged at most about once a second.
  const std::string log = broker.log();
  size_t lines = 0;
  for (size_t p = 0; (p = log.find("refused a node_hello", p)) != std::string::npos; ++p) ++lines;
  EXPECT_LE(lines, 20u);

  r = restart(broker);
  ASSERT_TRUE(r);
  EXPECT_LE(r->total, 256u);
}

TEST_F(nodes_limits_test, node_records_stop_at_max_nodes_also_after_a_restart) {
  broker_config(
      "max_nodes: 50\nmax_nodes_per_key: 4096\nhello_rate_per_peer: 100000\n"
      "hello_burst_per_peer: 100000\nhello_rate: 100000\nhello_burst: 100000\n");
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  fake_node flood(c_, "flood");
  auto heard = flood.hello_flood(5000, 20s);
  EXPECT_EQ(heard.welcomes, 50);
  ASSERT_EQ(heard.errors.size(), 4950u);
  EXPECT_EQ(heard.errors[0].code, wire::error_code::limit_reached);
  EXPECT_NE(heard.errors[0].message.find("the broker has 50 nodes registered (max_nodes)"),
            std::string::npos)
      << heard.errors[0].message;
  auto r = client->request<wire::nodes_reply>(wire::list_nodes{});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->total, 50u);
  EXPECT_FALSE(r->truncated);

  r = restart(broker);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->total, 50u);
  // A known name may come back (from the key it belongs to); a new one may not.
  fake_node again(c_, "flood");
  again.hello("flood-7", 1, {"alpha"});
  EXPECT_TRUE(again.welcomed());
  again.hello("flood-new", 1, {"alpha"});
  heard = again.listen(5s, [](auto& h) { return !h.errors.empty(); });
  ASSERT_EQ(heard.errors.size(), 1u);
  EXPECT_EQ(heard.errors[0].code, wire::error_code::limit_reached);
}

// One node key registers at most max_nodes_per_key names, so it cannot fill the broker's
// max_nodes records and lock other keys out. Before: one key filled all 256 in 6 s.
TEST_F(nodes_limits_test, one_key_registers_at_most_max_nodes_per_key_names) {
  broker_config(
      "max_nodes: 10\nmax_nodes_per_key: 4\nhello_rate_per_peer: 100000\n"
      "hello_burst_per_peer: 100000\nhello_rate: 100000\nhello_burst: 100000\n");
  auto broker = c_.start_broker();
  fake_node flood(c_, "flood");
  auto heard = flood.hello_flood(50, 10s);
  EXPECT_EQ(heard.welcomes, 4);
  ASSERT_EQ(heard.errors.size(), 46u);
  EXPECT_EQ(heard.errors[0].code, wire::error_code::limit_reached);
  EXPECT_NE(
      heard.errors[0].message.find("this node key has 4 nodes registered (max_nodes_per_key)"),
      std::string::npos)
      << heard.errors[0].message;
  // Its own names may say hello again; another key still registers.
  flood.hello("flood-2", 1, {"alpha"});
  EXPECT_TRUE(flood.welcomed());
  fake_node other(c_, "other");
  other.hello(1, {"alpha"});
  EXPECT_TRUE(other.welcomed()) << broker.log();
}

// Which node gets a job follows what the nodes did, not what they claim: a node claiming a GPU, a
// loaded model and 1000 slots that delivers slowly loses the jobs to a measured faster node once
// both have run one. Before: the claims won it all 12 jobs.
TEST_F(nodes_limits_test, a_node_wins_jobs_by_its_measured_rate_not_its_claims) {
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real = real_node(*client, 1, 400);
  fake_node boaster(c_, "boaster");
  std::jthread t([&](std::stop_token stop) {
    boaster.serve(1000, {"alpha"}, stop, [&](const wire::job_assign& a) {
      // Honest, but slow: the job's 8 tokens in about a second.
      boaster.send(wire::job_started{a.job_id, a.attempt, 1});
      for (uint64_t i = 0; i < 8; ++i) {
        std::this_thread::sleep_for(125ms);
        boaster.send(wire::job_tokens{a.job_id, a.attempt, i, 1, "w "});
      }
      wire::job_final f{a.job_id, a.attempt, wire::job_state::completed, "max_tokens", "", 1, 8};
      boaster.send(f);
      boaster.send(wire::node_pull{1});
    });
  });
  ASSERT_TRUE(node_online(*client, "boaster"));
  std::map<std::string, int> by_node;
  for (int i = 0; i < 12; ++i) {
    std::optional<wire::job_detail> d;
    ASSERT_NO_FATAL_FAILURE(testing::expect_completes(
        *client, job("alpha", "job " + std::to_string(i), 8), [&] { return broker.log(); }, &d,
        20s));
    ++by_node[d->summary.node];
  }
  t.request_stop();
  t.join();
  // One each to measure them (a node not measured yet gets a job while it runs none), then the
  // faster one.
  EXPECT_LE(by_node["boaster"], 2)
      << by_node["real"] << " on real, " << by_node["boaster"] << " on boaster";
  EXPECT_GE(by_node["real"], 10);
}

// Two `hearth-node --name twin` on one host against a broker without auth: the one connected
// first keeps the name and the other is refused name_taken and exits, instead of the two taking
// the name from each other on every reconnect. Before: 30 re-registrations in 15 s, neither exited.
TEST(nodes_same_name, a_second_node_process_of_a_name_exits_and_the_first_keeps_it) {
  cluster c(false);
  auto broker = c.start_broker();
  auto client = c.client("client");
  const auto dir = c.models("m", {"alpha"});
  auto first = c.start_node("twin", dir, "null", 1);
  ASSERT_TRUE(testing::nodes_online(*client, 1)) << first.log();
  auto second = c.start_node("twin", dir, "null", 1);
  testing::process* gone = nullptr;
  testing::process* kept = nullptr;
  wait_until(
      [&] {
        if (!second.running()) gone = &second, kept = &first;
        if (!first.running()) gone = &first, kept = &second;
        return gone != nullptr;
      },
      20s);
  ASSERT_TRUE(gone) << testing::logs_of(
      {{"broker", &broker}, {"first", &first}, {"second", &second}});
  // Normally the newcomer; under heavy load the first may miss two heartbeats and be replaced,
  // and then it is the one refused when it says hello again.
  EXPECT_EQ(gone->wait(), 1) << gone->log();
  EXPECT_NE(gone->log().find("is in use by another node process on"), std::string::npos)
      << gone->log();
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(kept->running()) << kept->log();
  auto n = node_named(*client, "twin");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->online);
  // No flapping: at most the two registrations (and one takeover under load).
  const std::string log = broker.log();
  size_t online = 0;
  for (size_t p = 0; (p = log.find("node twin (", p)) != std::string::npos; ++p) ++online;
  EXPECT_LE(online, 2u) << log;
}

TEST_F(nodes_limits_test, lists_of_thousands_of_nodes_and_models_fit_a_message) {
  // A database from before the limits, as the issue found it: thousands of node rows (one of
  // them the real node's, which may come back), each with many models.
  constexpr uint32_t k_nodes = 3000, k_models_each = 20;
  {
    auto store = broker::job_store::open(c_.db());
    ASSERT_TRUE(store) << store.message();
    (*store)->begin();
    for (uint32_t i = 0; i < k_nodes; ++i) {
      wire::node_summary n;
      n.name = i == 0 ? "real" : "old-" + std::to_string(i);
      n.hostname = "h";
      n.engine = "null";
      n.slots = 1;
      for (uint32_t k = 0; i > 0 && k < k_models_each; ++k) {
        wire::model_info m;
        m.name = "model-" + std::to_string(i) + "-" + std::to_string(k) + std::string(200, 'x');
        n.models.push_back(m);
      }
      (*store)->node_upsert(n);
    }
    (*store)->commit();
  }
  auto broker = c_.start_broker();
  auto client = c_.client("client");
  auto real = real_node(*client, 1, 0);
  auto r = client->request<wire::nodes_reply>(wire::list_nodes{});
  ASSERT_TRUE(r) << "nodes_reply decodes";
  // Each node row is about 5 KiB: the byte cap (4 MiB) ends the list before the count cap.
  EXPECT_TRUE(r->truncated);
  EXPECT_EQ(r->total, k_nodes);
  EXPECT_GT(r->nodes.size(), 100u);
  EXPECT_LT(r->nodes.size(), 1024u);
  ASSERT_FALSE(r->nodes.empty());
  EXPECT_EQ(r->nodes[0].name, "real") << "online nodes come first";
  auto m = client->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(m) << "models_reply decodes";
  const uint32_t n_models = (k_nodes - 1) * k_models_each + 1;
  EXPECT_TRUE(m->truncated);
  EXPECT_EQ(m->total, n_models);
  EXPECT_EQ(m->models.size(), 1024u) << "the count cap";
  ASSERT_FALSE(m->models.empty());
  EXPECT_EQ(m->models[0].name, "alpha") << "models in use come first";
  const std::string out = hearth_cli(c_, "nodes");
  EXPECT_NE(out.find("showing " + std::to_string(r->nodes.size()) + " of " +
                     std::to_string(k_nodes) + " nodes"),
            std::string::npos)
      << out.substr(0, 2000);
  EXPECT_NE(
      hearth_cli(c_, "models").find("showing 1024 of " + std::to_string(n_models) + " models"),
      std::string::npos);
  // More records than max_nodes (256): a new name is refused; the known one was welcomed.
  fake_node late(c_, "late");
  late.hello(1, {"alpha"});
  auto heard = late.listen(5s, [](auto& h) { return !h.errors.empty(); });
  ASSERT_EQ(heard.errors.size(), 1u);
  EXPECT_NE(heard.errors[0].message.find("the broker has 3000 nodes registered (max_nodes)"),
            std::string::npos)
      << heard.errors[0].message;
}

}  // namespace
}  // namespace hearth::testing
