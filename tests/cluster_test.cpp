// The distributed system end to end: hearth-broker and hearth-node processes on loopback, a real
// SQLite file, and a client on a real socket. Null-engine nodes where the test is about the
// broker; the batch engine on stories260K where the tokens themselves matter.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::cluster;
using testing::nodes_online;
using testing::test_client;
using testing::wait_until;

constexpr auto job = testing::greedy_job;

class cluster_test : public testing::stories_cluster_test {
 protected:
  // A broker, one node `name` serving `model` (stories260K underneath) on `engine` with `slots`
  // slots (and `node_args`), and a client; false when the client does not see the node online.
  bool start_one_node(const std::string& name, const std::string& model, const std::string& engine,
                      int slots, const std::vector<std::string>& node_args = {}) {
    broker_ = c_.start_broker();
    node_ = c_.start_node(name, models("m", {model}), engine, slots, node_args);
    client_ = c_.client();
    return nodes_online(*client_, 1);
  }
  testing::process broker_, node_;
  std::unique_ptr<test_client> client_;
};

TEST_F(cluster_test, submit_streams_the_reference_greedy_text_and_records_it) {
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  ASSERT_TRUE(start_one_node("cpu-node", "stories260K", "cpu", 1)) << broker_.log() << node_.log();
  auto& client = *client_;

  for (const auto& kase : ref["cases"]) {
    testing::greedy_run run;
    ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_text(
        client, "stories260K", kase["prompt"], kase["greedy_text"], [&] { return node_.log(); },
        &run));
    const auto& out = run.out;

    auto detail = client.wait_final(run.job_id);
    ASSERT_TRUE(detail);
    EXPECT_EQ(detail->summary.state, wire::job_state::completed);
    EXPECT_EQ(detail->summary.node, "cpu-node");
    EXPECT_EQ(detail->summary.attempts, 1u);
    EXPECT_EQ(detail->output, out.text);
    EXPECT_EQ(detail->summary.n_gen, 64u);
    std::vector<std::string> events;
    for (const auto& e : detail->events) events.push_back(e.event);
    EXPECT_EQ(events, (std::vector<std::string>{"queued", "assigned", "started", "completed"}));
  }
  wire::list_jobs q;
  q.state = "completed";
  auto hist = client.request<wire::jobs_reply>(q);
  ASSERT_TRUE(hist);
  EXPECT_EQ(hist->jobs.size(), ref["cases"].size());
}

TEST_F(cluster_test, concurrent_jobs_on_one_node_match_one_at_a_time) {
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  ASSERT_TRUE(start_one_node("batcher", "stories260K", "cpu", 4));
  auto& client = *client_;
  std::vector<std::pair<uint64_t, std::string>> jobs;
  for (int round = 0; round < 2; ++round) {
    for (const auto& kase : ref["cases"]) {
      auto acc = client.request<wire::accepted>(job("stories260K", kase["prompt"], 64));
      ASSERT_TRUE(acc);
      jobs.emplace_back(acc->job_id, kase["greedy_text"]);
    }
  }
  for (const auto& [id, expected] : jobs) {
    auto d = client.wait_final(id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error;
    EXPECT_EQ(d->output, expected) << "job " << id;
  }
}

TEST_F(cluster_test, jobs_go_only_to_nodes_that_serve_their_model) {
  auto broker = c_.start_broker();
  auto a = c_.start_node("node-a", models("a", {"alpha"}), "null", 2);
  auto b = c_.start_node("node-b", models("b", {"beta", "gamma"}), "null", 2);
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 2));
  std::map<uint64_t, std::string> expect;
  for (int i = 0; i < 12; ++i) {
    const std::string model = i % 3 == 0 ? "alpha" : i % 3 == 1 ? "beta" : "gamma";
    auto acc = client.request<wire::accepted>(job(model, "p" + std::to_string(i), 4));
    ASSERT_TRUE(acc);
    expect[acc->job_id] = model == "alpha" ? "node-a" : "node-b";
  }
  for (const auto& [id, node] : expect) {
    auto d = client.wait_final(id);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::completed);
    EXPECT_EQ(d->summary.node, node) << "job " << id << " model " << d->summary.model;
  }
  auto m = client.request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(m);
  ASSERT_EQ(m->models.size(), 3u);
  EXPECT_EQ(m->models[0].nodes, std::vector<std::string>{"node-a"});
}

TEST_F(cluster_test, priorities_order_the_queue_and_slots_bound_the_work) {
  auto broker = c_.start_broker();
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  // Queue everything before a node exists, then let one two-slot node work through it.
  std::vector<uint64_t> low, high;
  for (int i = 0; i < 4; ++i) {
    auto s = job("alpha", "low", 20);
    s.wait_model = true;
    low.push_back(client.request<wire::accepted>(s)->job_id);
  }
  for (int i = 0; i < 4; ++i) {
    auto s = job("alpha", "high", 20);
    s.wait_model = true;
    s.priority = 5;
    auto acc = client.request<wire::accepted>(s);
    ASSERT_TRUE(acc);
    high.push_back(acc->job_id);
  }
  auto node =
      c_.start_node("worker", models("a", {"alpha"}), "null", 2, {"--null-tokens-per-s", "400"});
  struct span {
    int64_t start, end;
  };
  std::map<uint64_t, span> spans;
  for (auto id : low) spans[id] = {};
  for (auto id : high) spans[id] = {};
  for (auto& [id, s] : spans) {
    auto d = client.wait_final(id);
    ASSERT_TRUE(d);
    ASSERT_EQ(d->summary.state, wire::job_state::completed);
    for (const auto& e : d->events) {
      if (e.event == "assigned") s.start = e.time_ms;
      if (e.event == "completed") s.end = e.time_ms;
    }
  }
  int64_t last_high = 0, first_low = INT64_MAX;
  for (auto id : high) last_high = std::max(last_high, spans[id].start);
  for (auto id : low) first_low = std::min(first_low, spans[id].start);
  EXPECT_LE(last_high, first_low) << "every high-priority job is assigned before any low one";
  // At no moment more than two jobs ran on the two-slot node.
  for (const auto& [id, s] : spans) {
    int overlapping = 0;
    for (const auto& [id2, s2] : spans) overlapping += s2.start <= s.start && s.start < s2.end;
    EXPECT_LE(overlapping, 2) << "job " << id;
  }
}

TEST_F(cluster_test, a_node_killed_mid_job_loses_nothing) {
  auto broker = c_.start_broker();
  const auto dir = models("m", {"alpha"});
  auto n1 = c_.start_node("first", dir, "null", 1, {"--null-tokens-per-s", "50"});
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 1));
  // 200 tokens at 50/s: the job is still running on the first node while the second starts
  // (a node start loads the GPU modules, which takes a second on a loaded machine).
  auto s = job("alpha", "survive", 200);
  s.watch = true;
  auto acc = client.request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  // Wait for tokens to flow from the first node, then kill it.
  ASSERT_TRUE(wait_until([&] {
    auto d = client.request<wire::job_reply>(wire::get_job{0, acc->job_id});
    return d && d->job.summary.n_gen >= 5;
  }));
  auto n2 = c_.start_node("second", dir, "null", 1, {"--null-tokens-per-s", "200"});
  ASSERT_TRUE(nodes_online(client, 2));
  n1.signal(SIGKILL);
  auto out = client.follow(acc->job_id);
  ASSERT_TRUE(out.done) << broker.log();
  EXPECT_EQ(out.done->state, wire::job_state::completed);
  EXPECT_EQ(out.restarts, 1u);
  auto d = client.wait_final(acc->job_id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.attempts, 2u);
  EXPECT_EQ(d->summary.node, "second");
  EXPECT_EQ(d->summary.n_gen, 200u);
  EXPECT_EQ(d->output, out.text);
  std::vector<std::string> seen;
  for (const auto& e : d->events) seen.push_back(e.event + "@" + e.node);
  EXPECT_EQ(seen, (std::vector<std::string>{"queued@", "assigned@first", "started@first",
                                            "requeued@first", "assigned@second", "started@second",
                                            "completed@second"}));
}

TEST_F(cluster_test, a_broker_killed_with_jobs_queued_and_running_loses_none) {
  ASSERT_TRUE(start_one_node("steady", "alpha", "null", 2, {"--null-tokens-per-s", "100"}));
  auto& client = *client_;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 10; ++i) {
    auto acc = client.request<wire::accepted>(job("alpha", "durable " + std::to_string(i), 30));
    ASSERT_TRUE(acc);
    ids.push_back(acc->job_id);
  }
  ASSERT_TRUE(wait_until([&] {
    auto r = client.request<wire::jobs_reply>(wire::list_jobs{0, "running", "", 20});
    return r && !r->jobs.empty();
  }));
  broker_.signal(SIGKILL);
  EXPECT_EQ(broker_.wait(), 128 + SIGKILL);
  broker_ = c_.start_broker();
  auto after_ptr = c_.client();
  auto& after = *after_ptr;
  for (auto id : ids) {
    auto d = after.wait_final(id);
    ASSERT_TRUE(d) << "job " << id << " was lost";
    EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error;
    EXPECT_EQ(d->summary.n_gen, 30u);
  }
  EXPECT_TRUE(node_.running()) << "the node reconnected by itself";
}

// A watch that the broker reads in the same turn as its job's end (a client re-watching after a
// reconnect while the node reports the job finished: a gateway's batch lost two lines this way)
// still gets the output and the end. The broker is stopped (SIGSTOP) while the node's job_final
// and the watches are sent, so that one turn reads them together, in the order their connections
// come in; three watchers make it likely that some come after the node.
TEST_F(cluster_test, a_watch_read_in_the_turn_its_job_ends_still_gets_the_end) {
  testing::fake_node node(c_, "ender");
  node.hello(1, {"alpha"});
  broker_ = c_.start_broker();
  ASSERT_TRUE(node.next<wire::node_welcome>()) << broker_.log();
  client_ = c_.client();
  std::vector<std::unique_ptr<test_client>> watchers;
  for (int i = 0; i < 3; ++i) watchers.push_back(c_.client());
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto acc = client_->request<wire::accepted>(job("alpha", "end " + std::to_string(round), 2));
    ASSERT_TRUE(acc) << broker_.log();
    node.send(wire::node_pull{1});
    auto a = node.next<wire::job_assign>();
    ASSERT_TRUE(a) << broker_.log();
    node.send(wire::job_started{a->job_id, a->attempt, 1});
    node.send(wire::job_tokens{a->job_id, a->attempt, 0, 2, "a b "});
    // The watchers' connections are known to the broker before it stops.
    for (auto& w : watchers) ASSERT_TRUE(w->request<wire::jobs_reply>(wire::list_jobs{}));
    broker_.signal(SIGSTOP);
    node.send(wire::job_final{.job_id = a->job_id,
                              .attempt = a->attempt,
                              .stop_reason = "max_tokens",
                              .n_prompt = 1,
                              .n_gen = 2});
    std::this_thread::sleep_for(50ms);
    for (auto& w : watchers)
      ASSERT_TRUE(w->send(wire::watch{.request_id = 1, .job_id = a->job_id}));
    std::this_thread::sleep_for(100ms);
    broker_.signal(SIGCONT);
    for (auto& w : watchers) {
      auto seen = w->follow(a->job_id, 10s);
      ASSERT_TRUE(seen.done) << "a watcher never heard of the end\n" << broker_.log();
      EXPECT_EQ(seen.done->state, wire::job_state::completed);
      EXPECT_EQ(seen.text, "a b ");
    }
  }
}

TEST_F(cluster_test, cancel_stops_running_and_queued_jobs) {
  ASSERT_TRUE(start_one_node("n", "alpha", "null", 1, {"--null-tokens-per-s", "20"}));
  auto& client = *client_;
  auto running = client.request<wire::accepted>(job("alpha", "long", 1000));
  auto queued = client.request<wire::accepted>(job("alpha", "waiting", 10));
  ASSERT_TRUE(running && queued);
  ASSERT_TRUE(wait_until([&] {
    auto d = client.request<wire::job_reply>(wire::get_job{0, running->job_id});
    return d && d->job.summary.n_gen >= 2;
  }));
  EXPECT_TRUE(client.request<wire::ok>(wire::cancel{0, queued->job_id}));
  EXPECT_TRUE(client.request<wire::ok>(wire::cancel{0, running->job_id}));
  for (auto id : {running->job_id, queued->job_id}) {
    auto d = client.wait_final(id, 5s);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->summary.state, wire::job_state::cancelled);
  }
  std::string err;
  EXPECT_FALSE(client.request<wire::ok>(wire::cancel{0, running->job_id}, &err));
  EXPECT_NE(err.find("not_cancellable"), std::string::npos) << err;
  EXPECT_FALSE(client.request<wire::ok>(wire::cancel{0, 999999}, &err));
  EXPECT_NE(err.find("not_found"), std::string::npos) << err;
}

TEST_F(cluster_test, bad_requests_get_clear_errors) {
  ASSERT_TRUE(start_one_node("n", "alpha", "null", 1));
  auto& client = *client_;
  std::string err;
  EXPECT_FALSE(client.request<wire::accepted>(job("no-such-model", "x", 4), &err));
  EXPECT_NE(err.find("unknown_model"), std::string::npos) << err;
  EXPECT_NE(err.find("no-such-model"), std::string::npos) << err;
  auto bad = job("alpha", "x", 4);
  bad.params.top_p = 2;
  EXPECT_FALSE(client.request<wire::accepted>(bad, &err));
  EXPECT_NE(err.find("top_p"), std::string::npos) << err;
  // The messages of common/generation-params.h, which the CLI and the node give too.
  EXPECT_FALSE(client.request<wire::accepted>(job("alpha", "x", 0), &err));
  EXPECT_NE(err.find("invalid_params"), std::string::npos) << err;
  EXPECT_NE(err.find("max_tokens must be in [1, 1048576], got 0"), std::string::npos) << err;
  auto cold = job("alpha", "x", 4);
  cold.params.temperature = -1;
  EXPECT_FALSE(client.request<wire::accepted>(cold, &err));
  EXPECT_NE(err.find("temperature must be finite and >= 0 (0 = greedy), got -1"), std::string::npos)
      << err;
  EXPECT_FALSE(client.request<wire::accepted>(job("alpha", "", 4), &err));
  EXPECT_NE(err.find("no prompt"), std::string::npos) << err;
  EXPECT_FALSE(client.request<wire::jobs_reply>(wire::list_jobs{0, "sleeping", "", 5}, &err));
  EXPECT_NE(err.find("unknown state"), std::string::npos) << err;
}

TEST_F(cluster_test, malformed_frames_are_dropped_and_everyone_else_is_served) {
  ASSERT_TRUE(start_one_node("n", "alpha", "null", 1));
  auto& client = *client_;

  zmq::context_t ctx;
  auto raw = net::make_socket(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::maxmsgsize, int64_t(-1));  // this peer sends what it likes
  net::curve_client_apply(raw, c_.client_keys("client", "raw"));
  raw.connect(c_.endpoint());
  auto send_frames = [&](const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      raw.send(zmq::buffer(frames[i]),
               i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  };
  const std::string sig(wire::signature);
  const std::string submit_cmd(1, char(wire::command::submit));
  const std::string good = wire::encode(job("alpha", "fine", 3));
  send_frames({"garbage"});
  send_frames({sig, submit_cmd});
  send_frames({sig, std::string(1, char(0x7f)), good});
  send_frames({sig, submit_cmd, good.substr(0, good.size() / 2)});            // truncated
  send_frames({sig, submit_cmd, good + "x"});                                 // trailing byte
  send_frames({sig, submit_cmd, std::string("\xdd\xff\xff\xff\xff", 5)});     // 4G-item array
  send_frames({sig, std::string(1, char(wire::command::job_tokens)), good});  // not a node
  send_frames({"HEARTH/9", submit_cmd, good});
  // A message over ZMQ_MAXMSGSIZE makes the broker's socket drop that connection (its own peer).
  auto big = net::make_socket(ctx, zmq::socket_type::dealer);
  big.set(zmq::sockopt::maxmsgsize, int64_t(-1));
  net::curve_client_apply(big, c_.client_keys("client", "big"));
  big.connect(c_.endpoint());
  big.send(zmq::buffer(sig), zmq::send_flags::sndmore);
  big.send(zmq::buffer(submit_cmd), zmq::send_flags::sndmore);
  big.send(zmq::buffer(std::string(size_t(wire::max_message_bytes) + 100, 'x')));
  std::this_thread::sleep_for(200ms);

  ASSERT_NO_FATAL_FAILURE(testing::expect_completes(client, job("alpha", "still served", 3),
                                                    [&] { return broker_.log(); }));
  EXPECT_TRUE(broker_.running());
  // The raw peer heard about the version mismatch (and got malformed errors for the rest).
  bool version_error = false, malformed_error = false;
  for (int i = 0; i < 20; ++i) {
    zmq::pollitem_t items[] = {{raw.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, 50ms);
    auto m = net::try_recv(raw, false);
    if (!m) continue;
    auto f = m->views();
    auto env = wire::open_envelope(f);
    if (!env.ok) continue;
    auto e = wire::decode<wire::error_reply>(env.env.body);
    if (e && e->code == wire::error_code::version_mismatch) version_error = true;
    if (e && e->code == wire::error_code::malformed) malformed_error = true;
  }
  EXPECT_TRUE(version_error);
  EXPECT_TRUE(malformed_error) << "a malformed request is answered, not only logged";
  // Only the one job above was recorded.
  auto hist = client.request<wire::jobs_reply>(wire::list_jobs{0, "", "", 50});
  ASSERT_TRUE(hist);
  EXPECT_EQ(hist->jobs.size(), 1u);
}

// A broker that cannot bind (the address is taken) says why and leaves no new database behind;
// a database that was there before stays, with its jobs.
TEST_F(cluster_test, a_broker_that_cannot_bind_leaves_no_database_behind) {
  auto first = c_.start_broker();
  auto client = c_.client();
  ASSERT_TRUE(client->request<wire::jobs_reply>(wire::list_jobs{})) << first.log();
  auto start_on_taken_port = [&](const std::string& db) {
    auto p = testing::spawn({HEARTH_BROKER_BIN, "--bind", c_.endpoint(), "--db", db},
                            c_.dir().file("taken.log"));
    EXPECT_EQ(p.wait(10s), 1) << p.log();
    EXPECT_NE(p.log().find("cannot bind " + c_.endpoint()), std::string::npos) << p.log();
  };
  auto nothing_left_of = [](const std::string& db) {
    for (const char* suffix : {"", "-wal", "-shm", ".lock"}) {
      EXPECT_FALSE(std::filesystem::exists(db + suffix)) << db + suffix << " was left behind";
    }
  };
  const std::string fresh = c_.dir().file("fresh.db");
  start_on_taken_port(fresh);
  nothing_left_of(fresh);
  // hearth up too.
  const std::string up_db = c_.dir().file("up.db");
  auto up = testing::run_command(
      std::string(HEARTH_BIN) + " up --bind " + c_.endpoint() + " --db " + up_db + " --models " +
      testing::shell_quote(models("up-models", {"stories260K"})) + " --http off");
  EXPECT_EQ(up.exit_code, 1) << up.err;
  EXPECT_NE(up.err.find("cannot bind " + c_.endpoint()), std::string::npos) << up.err;
  nothing_left_of(up_db);

  // An existing database: made by a broker elsewhere, with one job in it.
  const std::string kept = c_.dir().file("kept.db");
  {
    const std::string other = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
    auto elsewhere = testing::spawn({HEARTH_BROKER_BIN, "--bind", other, "--db", kept},
                                    c_.dir().file("elsewhere.log"));
    test_client c(other);
    auto s = job("stories260K", "kept", 1);
    s.wait_model = true;
    ASSERT_TRUE(wait_until([&] { return c.request<wire::accepted>(s).has_value(); }))
        << elsewhere.log();
    elsewhere.signal(SIGTERM);
    ASSERT_EQ(elsewhere.wait(10s), 0) << elsewhere.log();
  }
  start_on_taken_port(kept);
  ASSERT_TRUE(std::filesystem::exists(kept));
  const std::string other = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  auto again = testing::spawn({HEARTH_BROKER_BIN, "--bind", other, "--db", kept},
                              c_.dir().file("again.log"));
  test_client c(other);
  std::optional<wire::jobs_reply> jobs;
  ASSERT_TRUE(wait_until([&] {
    return (jobs = c.request<wire::jobs_reply>(wire::list_jobs{})).has_value();
  })) << again.log();
  EXPECT_EQ(jobs->jobs.size(), 1u);
}

}  // namespace
}  // namespace hearth

namespace hearth {
namespace {

// The `hearth` CLI against a live cluster, as a user types it.
struct cli_result {
  int exit_code = -1;
  std::string out, err;
};

// `broker` is what follows --broker: the endpoint, and the key options when the cluster has keys.
cli_result hearth_cli(const std::string& broker, const std::string& args) {
  const std::string err_file = ::testing::TempDir() + "hearth_cluster_cli_stderr.txt";
  const std::string cmd =
      std::string(HEARTH_BIN) + " " + args + " --broker " + broker + " 2>" + err_file;
  cli_result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = testing::read_file_text(err_file);
  return r;
}

TEST_F(cluster_test, the_cli_submits_streams_and_queries_history) {
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  const auto& kase = ref["cases"][0];
  ASSERT_TRUE(start_one_node("desk", "stories260K", "cpu", 2));
  auto& client = *client_;
  std::string ep = c_.endpoint();
  for (const auto& a : c_.key_args("client", "default")) ep += " " + a;

  auto r = hearth_cli(ep, "submit --stream -m stories260K -n 64 --temp 0 '" +
                              kase["prompt"].get<std::string>() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kase["greedy_text"].get<std::string>() + "\n");

  r = hearth_cli(ep, "submit --no-stream -m stories260K -n 8 --temp 0 'Once upon'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const uint64_t id = std::stoull(r.out);
  ASSERT_TRUE(client.wait_final(id));

  r = hearth_cli(ep, "watch " + std::to_string(id) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"done\""), std::string::npos) << r.out;

  r = hearth_cli(ep, "jobs --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto jobs = nlohmann::json::parse(r.out);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0]["job_id"], id);
  EXPECT_EQ(jobs[0]["node"], "desk");
  EXPECT_EQ(jobs[0]["state"], "completed");

  r = hearth_cli(ep, "jobs --state completed --model stories260K");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("completed"), std::string::npos);

  r = hearth_cli(ep, "job " + std::to_string(id) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto detail = nlohmann::json::parse(r.out);
  EXPECT_EQ(detail["summary"]["n_gen"], 8);
  EXPECT_EQ(detail["events"].size(), 4u);

  r = hearth_cli(ep, "nodes --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto nodes = nlohmann::json::parse(r.out);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["name"], "desk");
  EXPECT_EQ(nodes[0]["slots"], 2);
  EXPECT_GT(nodes[0]["hardware"]["cpu_threads"].get<int>(), 0);

  r = hearth_cli(ep, "models");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stories260K"), std::string::npos);
  EXPECT_NE(r.out.find("desk*"), std::string::npos) << "loaded on desk: " << r.out;

  r = hearth_cli(ep, "cancel " + std::to_string(id));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already"), std::string::npos) << r.err;

  r = hearth_cli(ep, "submit -m no-such-model 'hello'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such-model"), std::string::npos) << r.err;
}

TEST_F(cluster_test, an_over_long_prompt_fails_the_job_with_a_clear_error) {
  ASSERT_TRUE(start_one_node("small", "stories260K", "cpu", 1));
  auto& client = *client_;
  std::string prompt;
  for (int i = 0; i < 3000; ++i) prompt += "once upon a time ";
  auto acc = client.request<wire::accepted>(job("stories260K", prompt, 8));
  ASSERT_TRUE(acc);
  auto d = client.wait_final(acc->job_id);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, wire::job_state::failed);
  EXPECT_NE(d->summary.error.find("prompt has"), std::string::npos) << d->summary.error;
  EXPECT_EQ(d->summary.attempts, 1u) << "a job the model cannot take is not retried elsewhere";
  // The node is fine and serves the next job.
  ASSERT_NO_FATAL_FAILURE(testing::expect_completes(
      client, job("stories260K", "Once upon a time", 4), [&] { return node_.log(); }));
}

TEST_F(cluster_test, a_waiting_client_hears_its_queue_position) {
  ASSERT_TRUE(start_one_node("one", "alpha", "null", 1, {"--null-tokens-per-s", "100"}));
  auto& client = *client_;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(client.request<wire::accepted>(job("alpha", "ahead", 10)));
  auto s = job("alpha", "last", 2);
  s.watch = true;
  auto acc = client.request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  EXPECT_EQ(acc->position, 2u) << "two jobs wait ahead of it (one runs)";
  std::vector<uint32_t> positions;
  auto out = client.follow(acc->job_id);
  (void)out;
  // follow() consumed the events; ask again from a second watcher on a fresh job instead.
  auto s2 = job("alpha", "later", 2);
  s2.watch = true;
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(client.request<wire::accepted>(job("alpha", "ahead", 10)));
  auto acc2 = client.request<wire::accepted>(s2);
  ASSERT_TRUE(acc2);
  while (auto ev = client.next_event(3s)) {
    if (ev->cmd == wire::command::job_queued) {
      auto q = wire::decode<wire::job_queued>(ev->body);
      if (q && q->job_id == acc2->job_id) positions.push_back(q->position);
    }
    if (ev->cmd == wire::command::job_running) break;
  }
  ASSERT_FALSE(positions.empty());
  EXPECT_EQ(positions.back(), 0u);
  EXPECT_TRUE(std::is_sorted(positions.rbegin(), positions.rend())) << "positions only fall";
}

TEST_F(cluster_test, sigterm_on_a_node_finishes_or_hands_back_its_jobs) {
  auto broker = c_.start_broker();
  const auto dir = models("m", {"alpha"});
  std::ofstream(c_.dir().file("n.yaml")) << "drain_timeout_ms: 1500\n";
  auto leaving = c_.start_node("leaving", dir, "null", 2,
                               {"--null-tokens-per-s", "20", "--config", c_.dir().file("n.yaml")});
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 1));
  auto a = client.request<wire::accepted>(job("alpha", "short", 4));   // finishes in the drain
  auto b = client.request<wire::accepted>(job("alpha", "long", 400));  // is handed back
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(wait_until([&] {
    auto d = client.request<wire::job_reply>(wire::get_job{0, b->job_id});
    return d && d->job.summary.n_gen >= 1;
  }));
  leaving.signal(SIGTERM);
  EXPECT_EQ(leaving.wait(10s), 0) << leaving.log();
  auto da = client.wait_final(a->job_id, 5s);
  ASSERT_TRUE(da);
  EXPECT_EQ(da->summary.state, wire::job_state::completed);
  EXPECT_EQ(da->summary.attempts, 1u);
  auto staying = c_.start_node("staying", dir, "null", 1, {"--null-tokens-per-s", "0"});
  auto db = client.wait_final(b->job_id);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->summary.state, wire::job_state::completed);
  EXPECT_EQ(db->summary.node, "staying");
  EXPECT_EQ(db->summary.attempts, 2u);
  bool handed_back = false;
  for (const auto& e : db->events) {
    handed_back |= e.event == "requeued" && e.detail.find("handed it back") != std::string::npos;
  }
  EXPECT_TRUE(handed_back);
}

}  // namespace
}  // namespace hearth
