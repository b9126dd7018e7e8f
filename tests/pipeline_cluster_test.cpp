// One model split across nodes (issue 55, schema/PROTOCOL.md 17), end to end: hearth-broker and
// hearth-node processes on loopback with keys (CURVE on the broker's socket and on every stage
// socket). stories260K placed with `split` over two and then three nodes gives its reference
// greedy texts (what the whole model gives on one node, and llama.cpp); a stage's node killed
// (kill -9) mid-generation, first, middle or last, is replaced by a spare node and the job's
// greedy text is the undisturbed run's.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "engine/model-file.h"
#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::nodes_online;
using testing::test_client;

struct seen;

class pipeline_cluster_test : public testing::stories_cluster_test {
 protected:
  // `node_args` (a memory limit) for every node. Each node computes on one thread: four node
  // processes with a thread per core each would take the machine from the tests beside this one
  // (ctest -j 4), and stories260K needs none.
  void start(size_t n_nodes, std::vector<std::string> node_args = {}) {
    broker_ = c_.start_broker();
    const std::string dir = models("m", {"stories260K"});
    const std::string config = c_.dir().file("node.yaml");
    std::ofstream(config) << "threads: 1\n";
    node_args.insert(node_args.end(), {"--config", config});
    for (size_t i = 0; i < n_nodes; ++i)
      nodes_.push_back(c_.start_node("n" + std::to_string(i + 1), dir, "cpu", 2, node_args));
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
  void run_and_kill(int32_t n, size_t victim, seen& calm, seen& s, uint64_t& job);
  testing::process broker_;
  std::vector<testing::process> nodes_;
  std::unique_ptr<test_client> client_, admin_;
};

// A sampled job (temperature 0.8, a fixed seed) and the text it gave.
std::string sampled_text(test_client& client, const std::function<std::string()>& log) {
  wire::submit s = testing::greedy_job("stories260K", "Once upon a time", 96);
  s.params.temperature = 0.8f;
  s.params.seed = 1234;
  s.watch = true;
  auto acc = client.request<wire::accepted>(s);
  EXPECT_TRUE(acc);
  if (!acc) return "";
  auto out = client.follow(acc->job_id);
  EXPECT_TRUE(out.done) << log();
  return out.text;
}

TEST_F(pipeline_cluster_test, split_over_two_and_three_nodes_gives_the_whole_models_greedy_text) {
  ASSERT_NO_FATAL_FAILURE(start(3));
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  // Sampling with a seed, on one node (the model whole) first.
  const std::string whole_sampled = sampled_text(*client_, [&] { return logs(); });
  ASSERT_FALSE(whole_sampled.empty());
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
      // The job ran on the pipeline's last stage, which samples and streams; its history says
      // which nodes held which layers.
      EXPECT_EQ(detail->summary.node, plan.back());
      EXPECT_EQ(detail->summary.attempts, 1u);
      std::string stages_noted;
      for (const auto& e : detail->events)
        if (e.event == "stages") stages_noted = e.detail;
      EXPECT_NE(stages_noted.find(plan.front() + " layers 0-"), std::string::npos) << stages_noted;
      EXPECT_NE(stages_noted.find(plan.back() + " layers "), std::string::npos) << stages_noted;
    }
    // With sampling and a seed, the same text as the whole model's too.
    EXPECT_EQ(sampled_text(*client_, [&] { return logs(); }), whole_sampled);
  }
  // The stages ran on the nodes the plan named: each logged its share.
  for (size_t i = 0; i < nodes_.size(); ++i)
    EXPECT_NE(nodes_[i].log().find("layers ["), std::string::npos) << nodes_[i].log();
}

// A greedy job of `n` tokens that never ends early (the end-of-text token's logit lowered by 100).
wire::submit long_job(int32_t n) {
  wire::submit s = testing::greedy_job("stories260K", "Once upon a time", n);
  s.params.api.logit_bias = {{2, -100}};
  s.watch = true;
  return s;
}

// What a watcher saw of one job: the text of its latest attempt, in order.
struct seen {
  std::string text;
  uint32_t attempt = 0;
  uint64_t next = 0;  // tokens of the latest attempt so far
  uint32_t restarts = 0;
  std::optional<wire::job_done> done;
};

// Reads `job`'s events until `until` holds or it is done; false on a gap, a 60 s silence or
// after 5 minutes (a job that waits for ever hears its waiting reason now and then).
bool read_events(test_client& c, uint64_t job, seen& s, const std::function<bool()>& until) {
  const auto start = std::chrono::steady_clock::now();
  auto quiet_since = start;
  while (!s.done && !until()) {
    if (std::chrono::steady_clock::now() - start > 5min) return false;
    auto e = c.next_event(100ms);
    if (!e) {
      if (std::chrono::steady_clock::now() - quiet_since > 60s) return false;
      continue;
    }
    quiet_since = std::chrono::steady_clock::now();
    if (e->cmd == wire::command::job_tokens) {
      auto m = wire::decode<wire::job_tokens>(e->body);
      if (!m || m->job_id != job || m->attempt < s.attempt) continue;
      if (m->attempt > s.attempt) {
        s.attempt = m->attempt;
        s.text.clear();
        s.next = 0;
      }
      if (m->seq + m->n_tokens <= s.next) continue;  // a duplicate
      if (m->seq != s.next) return false;
      s.text += m->text;
      s.next += m->n_tokens;
    } else if (e->cmd == wire::command::job_restarted) {
      ++s.restarts;
    } else if (e->cmd == wire::command::job_done) {
      auto m = wire::decode<wire::job_done>(e->body);
      if (m && m->job_id == job) s.done = *m;
    }
  }
  return true;
}

// The undisturbed run of long_job(n) into `calm` (what a run with a stage killed must equal), then
// the same job (its id in `job`) into `s` with node `victim` killed (kill -9) once 100 of its
// tokens have arrived. Use inside ASSERT_NO_FATAL_FAILURE.
void pipeline_cluster_test::run_and_kill(int32_t n, size_t victim, seen& calm, seen& s,
                                         uint64_t& job) {
  auto acc = client_->request<wire::accepted>(long_job(n));
  ASSERT_TRUE(acc);
  ASSERT_TRUE(read_events(*client_, acc->job_id, calm, [] { return false; })) << logs();
  ASSERT_TRUE(calm.done) << logs();
  ASSERT_EQ(calm.done->state, wire::job_state::completed) << calm.done->error << logs();
  ASSERT_EQ(calm.next, uint64_t(n));
  acc = client_->request<wire::accepted>(long_job(n));
  ASSERT_TRUE(acc);
  job = acc->job_id;
  ASSERT_TRUE(read_events(*client_, job, s, [&] { return s.next >= 100; })) << logs();
  ASSERT_FALSE(s.done) << "the job ended before the kill: make it longer";
  nodes_[victim].signal(SIGKILL);
}

class pipeline_failover_test : public pipeline_cluster_test,
                               public ::testing::WithParamInterface<size_t> {};

// Stages n1 [0, a), n2 [a, b), n3 [b, 5); n4 is the spare. The parameter is the stage killed.
TEST_P(pipeline_failover_test, a_stage_killed_mid_generation_is_replaced_and_the_text_is_the_same) {
  const size_t killed = GetParam();
  ASSERT_NO_FATAL_FAILURE(start(4));
  ASSERT_EQ(split({"n1", "n2", "n3"}), "") << logs();
  seen calm, s;
  uint64_t job = 0;
  ASSERT_NO_FATAL_FAILURE(run_and_kill(1800, killed, calm, s, job));
  const auto t_kill = std::chrono::steady_clock::now();
  const auto wall_kill = std::chrono::system_clock::now();
  const uint64_t at_kill = s.next;
  ASSERT_TRUE(read_events(*client_, job, s, [&] { return s.next > at_kill || s.attempt > 1; }))
      << logs();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_kill).count();
  ASSERT_TRUE(read_events(*client_, job, s, [] { return false; })) << logs();
  ASSERT_TRUE(s.done) << logs();
  EXPECT_EQ(s.done->state, wire::job_state::completed) << s.done->error << logs();
  EXPECT_EQ(s.text, calm.text) << logs();
  if (killed < 2) {
    // The client may have been behind the stream (tokens relayed before the kill): the last
    // stage's log says when the step the kill cut ran again.
    const std::string log = nodes_[2].log();
    const size_t at = log.find("ran again");
    ASSERT_NE(at, std::string::npos) << log;
    const size_t line = log.rfind('\n', at) + 1;
    int h = 0, m = 0;
    double sec = 0;
    ASSERT_EQ(std::sscanf(log.c_str() + line + 11, "%d:%d:%lf", &h, &m, &sec), 3);
    const auto t = std::chrono::system_clock::to_time_t(wall_kill);
    std::tm local{};
    localtime_r(&t, &local);
    const double kill_s = local.tm_hour * 3600.0 + local.tm_min * 60.0 + local.tm_sec +
                          std::chrono::duration<double>(wall_kill.time_since_epoch()).count() -
                          double(std::chrono::system_clock::to_time_t(wall_kill));
    ms = (h * 3600.0 + m * 60.0 + sec - kill_s) * 1000;
    std::printf("%s\n", log.substr(line, log.find('\n', at) - line).c_str());
  }
  std::printf(
      "stage %zu of 3 killed after %llu tokens: the next token %.0f ms later (attempt %u)\n",
      killed + 1, static_cast<unsigned long long>(at_kill), ms, s.attempt);
  // The spare holds the killed stage now.
  auto listed = client_->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->models.size(), 1u);
  ASSERT_EQ(listed->models[0].stages.size(), 3u);
  EXPECT_EQ(listed->models[0].stages[killed].node, "n4");
  // The job's history names the spare among the stages that ran it.
  auto detail = client_->wait_final(job);
  ASSERT_TRUE(detail);
  std::string stages_noted;
  for (const auto& e : detail->events)
    if (e.event == "stages") stages_noted = e.detail;
  EXPECT_NE(stages_noted.find("n4 layers"), std::string::npos) << stages_noted;
  if (killed < 2) {
    // The last stage went on with the same attempt: its sequences replayed on the new stages.
    EXPECT_EQ(s.attempt, 1u);
    EXPECT_EQ(s.restarts, 0u);
    EXPECT_NE(nodes_[2].log().find("replayed"), std::string::npos) << nodes_[2].log();
  } else {
    // The last stage samples and streams: its attempt is lost, and run again on the spare.
    EXPECT_EQ(s.attempt, 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(stages, pipeline_failover_test, ::testing::Values(0, 1, 2),
                         [](const auto& param_info) {
                           return std::string(param_info.param == 0   ? "first"
                                              : param_info.param == 1 ? "middle"
                                                                      : "last");
                         });

// An admin's split over n1 and n2, each of which could hold the model whole; n1 (the first stage)
// killed mid-generation with no spare to take its layers: the broker dissolves the pipeline, takes
// the attempt back from n2 (which lets go of it at once, not after waiting for a new version), and
// n2 runs the job whole: a second attempt, with the undisturbed run's greedy text.
TEST_F(pipeline_cluster_test, a_split_that_loses_a_stage_without_a_spare_runs_on_whole) {
  ASSERT_NO_FATAL_FAILURE(start(2));
  ASSERT_EQ(split({"n1", "n2"}), "") << logs();
  seen calm, s;
  uint64_t job = 0;
  ASSERT_NO_FATAL_FAILURE(run_and_kill(1800, 0, calm, s, job));
  const auto t_kill = std::chrono::steady_clock::now();
  ASSERT_TRUE(read_events(*client_, job, s, [&] { return s.attempt > 1 && s.next > 0; })) << logs();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_kill).count();
  ASSERT_TRUE(read_events(*client_, job, s, [] { return false; })) << logs();
  ASSERT_TRUE(s.done) << logs();
  EXPECT_EQ(s.done->state, wire::job_state::completed) << s.done->error << logs();
  EXPECT_EQ(s.attempt, 2u);
  EXPECT_EQ(s.text, calm.text) << logs();
  std::printf(
      "stage 1 of 2 killed without a spare: the second attempt's first token %.0f ms later\n", ms);
  auto listed = client_->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->models.size(), 1u);
  EXPECT_TRUE(listed->models[0].stages.empty());
  auto detail = client_->wait_final(job);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->summary.node, "n2");
  std::string history;
  for (const auto& e : detail->events) history += e.event + " " + e.detail + "\n";
  EXPECT_NE(history.find("no spare node can take its layers"), std::string::npos) << history;
  // n2 let go of the step at once: it did not wait out the 30 s for a new version.
  EXPECT_NE(nodes_[1].log().find("was released, or planned again with another node last"),
            std::string::npos)
      << nodes_[1].log();
}

// What a node of 2 slots needs for stories260K whole (its weights, its slots' cache, scratch), as
// the node counts it.
uint64_t stories_whole_bytes() {
  auto f = model_file::open(testing::testdata_path("models/stories260K.gguf"));
  EXPECT_TRUE(f.ok());
  context_params cp;
  cp.n_seq_max = 2;
  cp.n_ctx = 2 * std::min(f->hparams.n_ctx_train, 4096);
  return memory_needed(f->hparams, f->weight_bytes, cp).total();
}

TEST_F(pipeline_cluster_test, a_model_no_node_can_hold_alone_is_split_by_the_broker) {
  // Each node offers 85% of what the model needs whole: none can run it, three together can.
  const uint64_t limit = stories_whole_bytes() * 85 / 100;
  ASSERT_NO_FATAL_FAILURE(start(3, {"--memory-limit", std::to_string(limit)}));
  const auto ref = nlohmann::json::parse(
      testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  const auto& kase = ref["cases"][0];
  testing::greedy_run run;
  ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_text(
      *client_, "stories260K", kase["prompt"], kase["greedy_text"], [&] { return logs(); }, &run));
  auto listed = client_->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->models.size(), 1u);
  const auto& stages = listed->models[0].stages;
  EXPECT_GE(stages.size(), 2u);
  EXPECT_EQ(stages.empty() ? 0 : stages.back().end, 5);
  EXPECT_NE(broker_.log().find("no online node can hold it alone"), std::string::npos);
}

TEST_F(pipeline_cluster_test,
       a_model_the_nodes_cannot_hold_even_split_waits_saying_what_is_missing) {
  // A tenth of the model each: no split fits.
  const uint64_t limit = stories_whole_bytes() / 10;
  ASSERT_NO_FATAL_FAILURE(start(3, {"--memory-limit", std::to_string(limit)}));
  auto acc = client_->request<wire::accepted>(testing::greedy_job("stories260K", "Once", 8));
  ASSERT_TRUE(acc);
  EXPECT_NE(acc->waiting.find("can hold model 'stories260K' alone"), std::string::npos)
      << acc->waiting;
  EXPECT_NE(acc->waiting.find("missing"), std::string::npos) << acc->waiting;
  // It stays queued: no node was given it.
  auto job = client_->request<wire::job_reply>(wire::get_job{0, acc->job_id});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->job.summary.state, wire::job_state::queued);
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
