// The null engine: text that depends only on (prompt, seed, index), a rate that is roughly kept,
// cancel within one token, stop, unknown models, and a high aggregate rate over many attempts.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "node/fake-job-sink.h"
#include "node/job-engine.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using testing::fake_job_sink;

class null_engine_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    if (stories.empty()) return;
    dir_ = new fs::path(fs::temp_directory_path() / "hearth_null_engine_models");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    fs::create_symlink(fs::absolute(stories), *dir_ / "stories.gguf");
    std::ofstream(*dir_ / "broken.gguf") << "garbage, not GGUF";
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override { ASSERT_TRUE(dir_) << "stories260K test data missing"; }

  static null_engine_config config(double tokens_per_s) {
    return {.models_dir = dir_->string(), .tokens_per_s = tokens_per_s};
  }
  static wire::job_assign job(uint64_t id, const std::string& prompt, int32_t max_tokens,
                              uint64_t seed, uint32_t attempt = 0) {
    wire::job_assign j;
    j.job_id = id;
    j.attempt = attempt;
    j.model = "stories";
    j.prompt = prompt;
    j.params.max_tokens = max_tokens;
    j.params.seed = seed;
    return j;
  }

  static inline fs::path* dir_ = nullptr;
};

TEST_F(null_engine_test, lists_the_catalog_models) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(1000), sink);
  EXPECT_EQ(engine->name(), "null");
  const auto models = engine->models();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].name, "stories");
  EXPECT_EQ(models[0].architecture, "llama");
  EXPECT_TRUE(models[0].loaded);
}

TEST_F(null_engine_test, text_depends_only_on_prompt_seed_and_index) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(0), sink);
  engine->submit(job(1, "Once upon a  time", 50, 42));
  engine->submit(job(1, "Once upon a  time", 50, 42, 1));  // a restarted attempt
  engine->submit(job(2, "Once upon a  time", 50, 43));
  engine->submit(job(3, "Another prompt", 50, 42));
  engine->submit(job(4, "", 1, 42));
  ASSERT_TRUE(sink.wait_all_finished({1, 2, 3, 4}));
  ASSERT_TRUE(sink.wait_finished(1, 1));

  // A second engine (a restarted node) streams the same text.
  fake_job_sink sink2;
  auto engine2 = make_null_engine(config(0), sink2);
  engine2->submit(job(9, "Once upon a  time", 50, 42));
  ASSERT_TRUE(sink2.wait_finished(9));

  const auto a = sink.record(1, 0);
  EXPECT_EQ(a.final->state, wire::job_state::completed);
  EXPECT_EQ(a.final->stop_reason, "max_tokens");
  EXPECT_EQ(a.final->n_gen, 50u);
  EXPECT_EQ(a.final->n_prompt, 4u);
  EXPECT_EQ(a.n_prompt, 4u);
  EXPECT_EQ(a.n_tokens, 50u);
  EXPECT_EQ(a.n_calls, 50u);
  EXPECT_TRUE(a.seq_ok && a.started_before_tokens);
  EXPECT_FALSE(a.text.empty());
  EXPECT_EQ(a.text, sink.record(1, 1).text);
  EXPECT_EQ(a.text, sink2.record(9).text);
  EXPECT_NE(a.text, sink.record(2).text);
  EXPECT_NE(a.text, sink.record(3).text);
  EXPECT_EQ(sink.record(3).n_prompt, 2u);

  const auto empty = sink.record(4);  // an empty prompt counts as one word
  EXPECT_EQ(empty.n_prompt, 1u);
  EXPECT_EQ(empty.final->n_gen, 1u);
  EXPECT_EQ(empty.final->state, wire::job_state::completed);
}

TEST_F(null_engine_test, keeps_roughly_to_the_rate) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(1000), sink);
  const auto t0 = std::chrono::steady_clock::now();
  engine->submit(job(1, "p", 100, 1));
  engine->submit(job(2, "q", 100, 2));  // the rate is per attempt
  ASSERT_TRUE(sink.wait_all_finished({1, 2}));
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  EXPECT_GE(ms.count(), 50);
  EXPECT_LE(ms.count(), 2000);
  EXPECT_GT(sink.record(1).final->gen_ms, 50);
}

TEST_F(null_engine_test, cancel_stops_an_attempt_within_one_token) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(2000), sink);
  sink.on_tokens = [&](const wire::job_ref& ref, uint64_t seq, uint32_t) {
    if (ref.job_id == 1 && seq == 5) engine->cancel(ref);
  };
  engine->submit(job(1, "p", 1000000, 1));
  engine->submit(job(2, "q", 20, 2));
  ASSERT_TRUE(sink.wait_all_finished({1, 2}));
  const auto r = sink.record(1);
  EXPECT_EQ(r.final->state, wire::job_state::cancelled);
  EXPECT_EQ(r.final->stop_reason, "cancelled");
  EXPECT_EQ(r.final->n_gen, 6u);
  EXPECT_EQ(sink.record(2).final->state, wire::job_state::completed);
  EXPECT_EQ(sink.record(2).final->n_gen, 20u);

  // A slow attempt is cancelled at once, not at its next token.
  auto slow = make_null_engine(config(0.5), sink);
  slow->submit(job(3, "p", 10, 1));
  ASSERT_TRUE(sink.wait_until([](const auto& m) { return m.count({3, 0}) > 0; }));
  const auto t0 = std::chrono::steady_clock::now();
  slow->cancel({3, 0});
  ASSERT_TRUE(sink.wait_finished(3));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  EXPECT_EQ(sink.record(3).final->state, wire::job_state::cancelled);
  EXPECT_EQ(sink.record(3).n_finished, 1);
}

TEST_F(null_engine_test, unknown_models_and_bad_params_fail) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(0), sink);
  auto unknown = job(1, "p", 10, 1);
  unknown.model = "broken";
  engine->submit(unknown);
  engine->submit(job(2, "p", -1, 1));
  engine->submit(job(3, "p", 0, 1));
  ASSERT_TRUE(sink.wait_all_finished({1, 2, 3}));
  EXPECT_EQ(sink.record(1).final->state, wire::job_state::failed);
  EXPECT_EQ(sink.record(1).final->error, "model 'broken' is not in this node's models directory");
  EXPECT_FALSE(sink.record(1).started);
  EXPECT_EQ(sink.record(2).final->state, wire::job_state::failed);
  // The one parameter check's message (schema/job-params.h), as the broker would give it.
  EXPECT_EQ(sink.record(3).final->error, "max_tokens must be in [1, 1048576], got 0");
  EXPECT_FALSE(sink.record(3).started);
}

TEST_F(null_engine_test, stop_returns_the_unfinished_attempts) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(100), sink);
  engine->submit(job(1, "p", 1000, 1));
  engine->submit(job(2, "q", 1000, 2));
  engine->submit(job(3, "r", 1, 3));
  ASSERT_TRUE(sink.wait_finished(3));
  ASSERT_TRUE(sink.wait_until([](const auto& m) { return m.count({1, 0}) && m.count({2, 0}); }));
  const auto refs = engine->stop();
  std::set<uint64_t> ids;
  for (const auto& r : refs) ids.insert(r.job_id);
  EXPECT_EQ(ids, (std::set<uint64_t>{1, 2}));
  EXPECT_FALSE(sink.record(1).final);
  EXPECT_FALSE(sink.record(2).final);
  EXPECT_TRUE(engine->stop().empty());
  engine->submit(job(4, "p", 1, 1));
  EXPECT_EQ(sink.record(4).final->state, wire::job_state::failed);
}

TEST_F(null_engine_test, sustains_a_high_aggregate_rate) {
  fake_job_sink sink;
  auto engine = make_null_engine(config(10000), sink);  // 200 attempts: 2M tokens/s wanted
  std::vector<uint64_t> ids;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 200; ++i) {
    engine->submit(job(i, "p", 1000, i));
    ids.push_back(i);
  }
  ASSERT_TRUE(sink.wait_all_finished(ids, std::chrono::seconds(60)));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("200 attempts x 1000 tokens at 10000 tok/s each: %.3f s, %.0f tokens/s\n", s,
              200000 / s);
  EXPECT_LT(s, 20);  // 0.1 s at the asked rate; generous for a loaded test machine
  for (uint64_t i : ids) EXPECT_EQ(sink.record(i).n_tokens, 1000u);
}

}  // namespace
}  // namespace hearth::node
