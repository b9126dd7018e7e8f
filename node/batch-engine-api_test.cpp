// The batch engine's answers to issue 56's requests, on the real stories260K model (CPU): output
// events (content equal to the plain text of the same seed), n choices from one prompt decoded
// once (each choice what a job of one choice with its seed gives), and the context's sequence
// copy they rest on.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "node/fake-job-sink.h"
#include "node/job-engine.h"
#include "schema/job-params.h"
#include "schema/output-events.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using testing::fake_job_sink;

// What a choice's events say: its content and reasoning text, its calls and its finish.
struct choice_events {
  std::string content;
  std::string reasoning;
  std::vector<wire::tool_call> calls;
  std::vector<wire::sampled_logprob> probs;
  std::string finish;
  int n_finish = 0;
};

class batch_engine_api_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    if (stories.empty()) return;
    model_ = model::load(stories, {}).release();
    dir_ = new fs::path(fs::temp_directory_path() / "hearth_batch_engine_api_models");
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    fs::create_symlink(fs::absolute(stories), *dir_ / "stories.gguf");
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete model_;
  }
  void SetUp() override { ASSERT_TRUE(model_) << "stories260K test data missing"; }

  batch_engine_config config(uint32_t slots, int32_t n_ctx_per_slot) {
    batch_engine_config c;
    c.models_dir = dir_->string();
    c.slots = slots;
    c.threads = 1;
    c.n_ctx_per_slot = n_ctx_per_slot;
    return c;
  }

  static wire::job_params sampled(int32_t max_tokens, uint64_t seed) {
    wire::job_params p;
    p.max_tokens = max_tokens;
    p.temperature = 0.9f;
    p.repeat_penalty = 1.1f;
    p.seed = seed;
    return p;
  }

  static wire::job_assign job(uint64_t id, const std::string& prompt, wire::job_params p) {
    wire::job_assign j;
    j.job_id = id;
    j.model = "stories";
    j.prompt = prompt;
    j.params = std::move(p);
    return j;
  }

  // The finished attempt's events by choice, checking what every events stream must hold: whole
  // lines, tokens with every text, one finish per choice and nothing after it.
  static std::vector<choice_events> events_of(const fake_job_sink& sink, uint64_t id) {
    const auto r = sink.record(id);
    EXPECT_TRUE(r.final && r.final->state == wire::job_state::completed)
        << "job " << id << ": " << (r.final ? r.final->error : "did not finish");
    EXPECT_TRUE(r.seq_ok && r.text_with_tokens && r.started_before_tokens) << "job " << id;
    if (r.final) EXPECT_EQ(r.final->n_gen, r.n_tokens) << "job " << id;
    auto events = wire::output_events_parse(r.text);
    EXPECT_TRUE(events.ok()) << (events.ok() ? "" : events.message());
    std::vector<choice_events> out;
    if (!events.ok()) return out;
    for (const auto& e : *events) {
      if (out.size() <= e.choice) out.resize(e.choice + 1);
      choice_events& c = out[e.choice];
      EXPECT_EQ(c.n_finish, 0) << "job " << id << ": an event after choice " << e.choice
                               << " finished";
      switch (e.kind) {
        case wire::output_event_kind::content:
          c.content += e.text;
          break;
        case wire::output_event_kind::reasoning:
          c.reasoning += e.text;
          break;
        case wire::output_event_kind::tool_call:
          c.calls.push_back(e.call);
          break;
        case wire::output_event_kind::logprobs:
          c.probs.insert(c.probs.end(), e.probs.begin(), e.probs.end());
          break;
        case wire::output_event_kind::finish:
          c.finish = e.text;
          ++c.n_finish;
          break;
      }
    }
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(out[i].n_finish, 1) << "job " << id << " choice " << i;
    return out;
  }

  static inline hearth::model* model_ = nullptr;
  static inline fs::path* dir_ = nullptr;
};

// The same prompt, parameters and seed: the events' content is the plain job's text, and the
// finish says why it ended as OpenAI does.
TEST_F(batch_engine_api_test, events_content_is_the_plain_text_of_the_same_seed) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 128), sink);
  std::vector<wire::job_params> params = {sampled(40, 3), sampled(64, 9), sampled(30, 4)};
  params[2].stop = {"e"};  // ends early, on a stop string
  for (uint64_t i = 0; i < params.size(); ++i) {
    engine->submit(job(i, "Once upon a time", params[i]));
    wire::job_params with_events = params[i];
    with_events.api.events = true;
    engine->submit(job(10 + i, "Once upon a time", with_events));
  }
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 10, 11, 12}));
  for (uint64_t i = 0; i < params.size(); ++i) {
    const auto plain = sink.record(i);
    const auto events = events_of(sink, 10 + i);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].content, plain.text) << "job " << i;
    EXPECT_TRUE(events[0].reasoning.empty() && events[0].calls.empty());
    const std::string want = plain.final->stop_reason == "max_tokens" ? "length" : "stop";
    EXPECT_EQ(events[0].finish, want) << "job " << i;
    EXPECT_EQ(sink.record(10 + i).final->stop_reason, plain.final->stop_reason);
    // Tokens sampled: the generated ones, and the end-of-generation token when one ended it.
    EXPECT_EQ(sink.record(10 + i).final->n_gen,
              plain.final->n_gen + (plain.final->stop_reason == "end_of_generation" ? 1 : 0));
  }
  EXPECT_EQ(sink.record(12).final->stop_reason, "stop_string");
}

// n = 3: three choices, the prompt decoded once for all of them, and choice i what a job of one
// choice gives with seed + i (its cells are copies of choice 0's, the same keys and values).
TEST_F(batch_engine_api_test, n_choices_share_one_prompt_decode_and_each_samples_its_own_seed) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(4, 128), sink);
  const std::string prompt = "Once upon a time, there was a little dog";
  const uint32_t n_prompt = uint32_t(model_->vocab().tokenize(prompt, true, false).size());
  wire::job_params p = sampled(48, 21);
  p.api.events = true;
  p.api.n = 3;
  const uint64_t decoded_before = engine->prompt_tokens_decoded();
  engine->submit(job(0, prompt, p));
  ASSERT_TRUE(sink.wait_finished(0));
  EXPECT_EQ(engine->prompt_tokens_decoded() - decoded_before, n_prompt);
  EXPECT_EQ(sink.record(0).final->n_prompt, n_prompt);
  const auto choices = events_of(sink, 0);
  ASSERT_EQ(choices.size(), 3u);

  // Each alone, one after the other.
  for (uint64_t i = 0; i < 3; ++i) {
    wire::job_params one = sampled(48, 21 + i);
    one.api.events = true;
    engine->submit(job(1 + i, prompt, one));
    ASSERT_TRUE(sink.wait_finished(1 + i));
    const auto alone = events_of(sink, 1 + i);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(choices[i].content, alone[0].content) << "choice " << i;
    EXPECT_EQ(choices[i].finish, alone[0].finish) << "choice " << i;
  }
  EXPECT_NE(choices[0].content, choices[1].content);
  EXPECT_NE(choices[1].content, choices[2].content);
  EXPECT_EQ(engine->prompt_tokens_decoded() - decoded_before, 4 * n_prompt);
}

// Choices of several attempts side by side, more than the slots at once: each attempt waits for
// as many free sequences as it has choices, and each gives what it gives alone.
TEST_F(batch_engine_api_test, attempts_of_several_choices_wait_for_free_sequences) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(3, 96), sink);
  std::vector<wire::job_params> params;
  for (int i = 0; i < 4; ++i) {
    wire::job_params p = sampled(20 + 7 * i, 40 + uint64_t(i));
    p.api.events = true;
    p.api.n = 1 + i % 3;  // 1, 2, 3, 1
    params.push_back(p);
    engine->submit(job(uint64_t(i), "Once upon a time", p));
  }
  ASSERT_TRUE(sink.wait_all_finished({0, 1, 2, 3}));
  std::vector<std::vector<choice_events>> got;
  for (uint64_t i = 0; i < params.size(); ++i) {
    got.push_back(events_of(sink, i));
    EXPECT_EQ(got.back().size(), size_t(params[i].api.n)) << "job " << i;
  }
  // Each choice again as a job of one choice with its seed.
  for (uint64_t i = 0; i < params.size(); ++i) {
    for (int32_t k = 0; k < params[i].api.n; ++k) {
      wire::job_params one = params[i];
      one.api.n = 1;
      one.seed += uint64_t(k);
      const uint64_t id = 100 + i * 10 + uint64_t(k);
      engine->submit(job(id, "Once upon a time", one));
      ASSERT_TRUE(sink.wait_finished(id));
      const auto alone = events_of(sink, id);
      ASSERT_EQ(alone.size(), 1u);
      if (size_t(k) < got[i].size())
        EXPECT_EQ(got[i][size_t(k)].content, alone[0].content) << "job " << i << " choice " << k;
    }
  }
}

TEST_F(batch_engine_api_test, choices_beyond_the_slots_or_without_events_are_refused) {
  fake_job_sink sink;
  auto engine = make_batch_engine(config(2, 64), sink);
  wire::job_params p = sampled(8, 1);
  p.api.events = true;
  p.api.n = 3;
  engine->submit(job(0, "Once", p));
  p.api.events = false;
  p.api.n = 2;
  engine->submit(job(1, "Once", p));
  ASSERT_TRUE(sink.wait_all_finished({0, 1}));
  const auto r0 = sink.record(0), r1 = sink.record(1);
  EXPECT_EQ(r0.final->state, wire::job_state::failed);
  EXPECT_EQ(r0.final->stop_reason, "");  // another node may have the slots
  EXPECT_NE(r0.final->error.find("slots"), std::string::npos) << r0.final->error;
  EXPECT_EQ(r1.final->state, wire::job_state::failed);
  EXPECT_EQ(r1.final->stop_reason, wire::stop_reason_invalid_request);
  EXPECT_FALSE(r0.started || r1.started);
}

// context::seq_copy: a sequence continued from copied cells computes what the original does.
TEST_F(batch_engine_api_test, a_copied_sequence_continues_as_the_original) {
  context ctx(*model_, {.n_ctx = 256, .n_seq_max = 3});
  const auto prompt = model_->vocab().tokenize("Once upon a time", true, false);
  std::vector<batch_token> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({prompt[i], int32_t(i), 0, i + 1 == prompt.size()});
  ASSERT_TRUE(ctx.decode(batch).ok());
  ASSERT_TRUE(ctx.seq_copy(0, 1).ok());
  EXPECT_EQ(ctx.seq_next_pos(1), int32_t(prompt.size()));
  EXPECT_FALSE(ctx.seq_copy(0, 1).ok());  // not empty
  EXPECT_FALSE(ctx.seq_copy(0, 0).ok());
  EXPECT_FALSE(ctx.seq_copy(0, 3).ok());
  // The same next token on both: identical rows, bit for bit.
  const int32_t next = 42;
  std::vector<batch_token> two = {{next, int32_t(prompt.size()), 0, true},
                                  {next, int32_t(prompt.size()), 1, true}};
  ASSERT_TRUE(ctx.decode(two).ok());
  const int32_t n_vocab = ctx.n_vocab();
  EXPECT_EQ(std::vector<float>(ctx.logits(0), ctx.logits(0) + n_vocab),
            std::vector<float>(ctx.logits(1), ctx.logits(1) + n_vocab));
  // And the original's cells freed leave the copy whole.
  ctx.seq_clear(0);
  std::vector<batch_token> one = {{7, int32_t(prompt.size()) + 1, 1, true}};
  ASSERT_TRUE(ctx.decode(one).ok());
  context fresh(*model_, {.n_ctx = 256});
  std::vector<batch_token> all = batch;
  all.back().logits = false;
  all.push_back({next, int32_t(prompt.size()), 0, false});
  all.push_back({7, int32_t(prompt.size()) + 1, 0, true});
  ASSERT_TRUE(fresh.decode(all).ok());
  EXPECT_EQ(std::vector<float>(ctx.logits(0), ctx.logits(0) + n_vocab),
            std::vector<float>(fresh.logits(0), fresh.logits(0) + n_vocab));
}

}  // namespace
}  // namespace hearth::node
