// End-to-end generation on the real stories260K model: the reference's greedy continuations token
// for token, context reuse and warm-up giving exactly a fresh context's results, several sequences
// in one batch giving what each gives alone, and errors that leave the context untouched.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/sequence.h"
#include "tests/conformance.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

class stories : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::testdata_path("models/stories260K.gguf");
    const std::string ref = testing::testdata_path("reference/stories260K.json");
    if (path.empty() || ref.empty()) return;
    model_ = model::load(path, {}).release();
    reference_ = new nlohmann::json(nlohmann::json::parse(testing::read_file_text(ref)));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete reference_;
  }
  void SetUp() override { ASSERT_TRUE(model_ && reference_) << "stories260K test data missing"; }

  // Logits of every prompt position for `tokens` decoded as sequence `seq` of `ctx`.
  static std::vector<float> prompt_logits(context& ctx, const std::vector<int32_t>& tokens,
                                          int32_t seq = 0) {
    std::vector<batch_token> batch;
    for (size_t i = 0; i < tokens.size(); ++i) batch.push_back({tokens[i], int32_t(i), seq, true});
    EXPECT_TRUE(ctx.decode(batch).ok());
    return {ctx.logits(0), ctx.logits(0) + size_t(ctx.n_logits()) * size_t(ctx.n_vocab())};
  }

  static std::vector<int32_t> greedy(context& ctx, const std::vector<int32_t>& prompt, int32_t n) {
    sampler smp({.temperature = 0}, ctx.n_vocab());
    auto g = generate(ctx, prompt, smp, {.max_tokens = n}, nullptr);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.message());
    return g.ok() ? g->tokens : std::vector<int32_t>{};
  }

  static inline model* model_ = nullptr;
  static inline nlohmann::json* reference_ = nullptr;
};

TEST_F(stories, greedy_continuations_match_the_reference_token_for_token) {
  context ctx(*model_, {.n_ctx = 128});
  for (const auto& c : (*reference_)["cases"]) {
    const auto prompt = model_->vocab().tokenize(c["prompt"].get<std::string>(), true, false);
    EXPECT_EQ(prompt, c["prompt_tokens"].get<std::vector<int32_t>>()) << c["prompt"];
    ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_reference(ctx, prompt, c));
  }
}

TEST_F(stories, a_reused_context_gives_exactly_what_a_fresh_one_gives) {
  const auto& cases = (*reference_)["cases"];
  const auto long_prompt = cases[2]["prompt_tokens"].get<std::vector<int32_t>>();   // 12 tokens
  const auto short_prompt = cases[0]["prompt_tokens"].get<std::vector<int32_t>>();  // 5 tokens

  for (const auto& [warm, then] :
       {std::pair{long_prompt, short_prompt}, std::pair{short_prompt, long_prompt}}) {
    context fresh(*model_, {.n_ctx = 96});
    const auto want = prompt_logits(fresh, then);
    const auto want_tokens = greedy(fresh, then, 40);

    context reused(*model_, {.n_ctx = 96});
    greedy(reused, warm, 50);  // warm-up fills more cells than the second prompt needs
    reused.seq_clear(0);
    EXPECT_EQ(reused.n_free(), 96);
    const auto got = prompt_logits(reused, then);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;
    EXPECT_EQ(greedy(reused, then, 40), want_tokens);
  }
}

TEST_F(stories, a_warmed_up_context_gives_exactly_what_a_fresh_one_gives) {
  const auto prompt = (*reference_)["cases"][2]["prompt_tokens"].get<std::vector<int32_t>>();
  context fresh(*model_, {.n_ctx = 64});
  const auto want = prompt_logits(fresh, prompt);
  const auto want_tokens = greedy(fresh, prompt, 30);

  context warmed(*model_, {.n_ctx = 64});
  auto w = warmed.warm_up();
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(warmed.n_free(), 64);
  EXPECT_EQ(warmed.n_logits(), 0);
  const auto got = prompt_logits(warmed, prompt);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;

  // A context holding tokens is not warmed up: that would drop them. It is left as it was.
  const int32_t held = warmed.n_free();
  w = warmed.warm_up();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("already holds " + std::to_string(64 - held) + " tokens"),
            std::string::npos)
      << w.message();
  EXPECT_EQ(warmed.n_free(), held);
  warmed.seq_clear(0);
  EXPECT_EQ(greedy(warmed, prompt, 30), want_tokens);
}

TEST_F(stories, a_kept_prefix_continued_with_n_past_gives_what_the_whole_prompt_gives) {
  const auto whole = (*reference_)["cases"][2]["prompt_tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> prefix(whole.begin(), whole.begin() + 7);
  const std::vector<int32_t> rest(whole.begin() + 7, whole.end());
  constexpr int32_t n_gen = 24;

  context fresh(*model_, {.n_ctx = 64});
  const auto want = greedy(fresh, whole, n_gen);

  // The prefix is decoded once; every run cuts the cache back to it (seq_truncate) and goes on
  // from position 7 (n_past), first after a longer generation has filled the cells beyond it.
  context ctx(*model_, {.n_ctx = 64});
  prompt_logits(ctx, prefix);
  for (int32_t run = 0; run < 3; ++run) {
    ctx.seq_truncate(0, int32_t(prefix.size()));
    EXPECT_EQ(ctx.n_free(), 64 - int32_t(prefix.size()));
    EXPECT_EQ(ctx.seq_next_pos(0), int32_t(prefix.size()));
    sampler smp({.temperature = 0}, ctx.n_vocab());
    sequence q(
        model_->vocab(), smp, rest,
        {.max_tokens = run == 0 ? 40 : n_gen, .n_ctx = 64, .n_past = int32_t(prefix.size())});
    std::vector<int32_t> got;
    std::vector<batch_token> batch;
    while (!q.done()) {
      batch.clear();
      q.append_batch(batch);
      ASSERT_EQ(batch.front().pos, ctx.seq_next_pos(0));
      ASSERT_TRUE(ctx.decode(batch).ok());
      q.decoded();
      if (auto piece = q.step(ctx.logits(0))) got.push_back(piece->token);
    }
    if (run > 0) {
      EXPECT_EQ(got, want) << "run " << run;
    }
  }
}

TEST_F(stories, sequences_decoded_together_match_each_decoded_alone) {
  const auto& cases = (*reference_)["cases"];
  const auto a = cases[0]["prompt_tokens"].get<std::vector<int32_t>>();
  const auto b = cases[2]["prompt_tokens"].get<std::vector<int32_t>>();
  constexpr int32_t n_gen = 32;

  context alone(*model_, {.n_ctx = 128});
  const auto want_a = greedy(alone, a, n_gen);
  const auto want_b = greedy(alone, b, n_gen);

  // Both prompts in one forward pass, then both sequences advanced one token per pass together.
  context both(*model_, {.n_ctx = 128, .n_seq_max = 2});
  std::vector<batch_token> batch;
  for (size_t i = 0; i < a.size(); ++i) batch.push_back({a[i], int32_t(i), 0, i + 1 == a.size()});
  for (size_t i = 0; i < b.size(); ++i) batch.push_back({b[i], int32_t(i), 1, i + 1 == b.size()});
  ASSERT_TRUE(both.decode(batch).ok());
  std::vector<int32_t> got_a, got_b;
  auto argmax = [&](int32_t row) {
    const float* l = both.logits(row);
    return int32_t(std::max_element(l, l + both.n_vocab()) - l);
  };
  for (int32_t step = 0; step < n_gen; ++step) {
    got_a.push_back(argmax(0));
    got_b.push_back(argmax(1));
    if (step + 1 == n_gen) break;
    const batch_token next[2] = {{got_a.back(), int32_t(a.size()) + step, 0, true},
                                 {got_b.back(), int32_t(b.size()) + step, 1, true}};
    ASSERT_TRUE(both.decode(next).ok());
  }
  EXPECT_EQ(got_a, want_a);
  EXPECT_EQ(got_b, want_b);
}

TEST_F(stories, a_prompt_longer_than_the_context_is_an_error_that_changes_nothing) {
  context ctx(*model_, {.n_ctx = 8});
  const auto prompt =
      (*reference_)["cases"][2]["prompt_tokens"].get<std::vector<int32_t>>();  // 12 tokens
  sampler smp({.temperature = 0}, ctx.n_vocab());
  auto g = generate(ctx, prompt, smp, {.max_tokens = 4}, nullptr);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.message().find("context"), std::string::npos) << g.message();
  EXPECT_EQ(ctx.n_free(), 8);
}

TEST_F(stories, invalid_batches_are_rejected_before_any_change) {
  context ctx(*model_, {.n_ctx = 16, .n_seq_max = 2});
  const batch_token bad_token[] = {{1, 0, 0, true}, {99999, 1, 0, true}};
  auto r = ctx.decode(bad_token);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("99999"), std::string::npos) << r.message();
  const batch_token bad_seq[] = {{1, 0, 5, true}};
  EXPECT_FALSE(ctx.decode(bad_seq).ok());
  const batch_token bad_pos[] = {{1, -3, 0, true}};
  EXPECT_FALSE(ctx.decode(bad_pos).ok());
  EXPECT_FALSE(ctx.decode({}).ok());
  EXPECT_EQ(ctx.n_free(), 16);
}

TEST_F(stories, generation_stops_at_stop_strings_and_when_cancelled) {
  context ctx(*model_, {.n_ctx = 128});
  const auto prompt = (*reference_)["cases"][0]["prompt_tokens"].get<std::vector<int32_t>>();
  sampler smp({.temperature = 0}, ctx.n_vocab());
  // The reference continuation is ", there was a little girl named Lily. ..."
  auto g = generate(ctx, prompt, smp, {.max_tokens = 64, .stop = {"girl"}}, nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, stop_reason::stop_string);
  EXPECT_EQ(g->text, ", there was a little ");

  // Streaming sees exactly the final text, never the held-back stop string.
  std::string streamed;
  smp.reset();
  g = generate(ctx, prompt, smp, {.max_tokens = 64, .stop = {"Lily."}},
               [&](const generated_piece& p) { return streamed += p.text, true; });
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(streamed, ", there was a little girl named ");
  EXPECT_EQ(streamed, g->text);

  // Cancelling from the callback stops after that token.
  int calls = 0;
  g = generate(ctx, prompt, smp, {.max_tokens = 64},
               [&](const generated_piece&) { return ++calls < 3; });
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, stop_reason::cancelled);
  EXPECT_EQ(g->tokens.size(), 3u);
}

TEST_F(stories, generation_ends_at_an_end_of_generation_token) {
  // stories260K never emits its EOS within reach, so a copy declares '.' (426, the 11th token
  // of the first greedy continuation) to be EOS.
  const auto path = testing::write_stories_variant(
      "eos", {.metadata = [](gguf_writer& w) { w.set_u32("tokenizer.ggml.eos_token_id", 426); }});
  auto m = model::load(path, {});
  context ctx(*m, {.n_ctx = 128});
  const auto& c = (*reference_)["cases"][0];
  sampler smp({.temperature = 0}, ctx.n_vocab());
  auto g = generate(ctx, c["prompt_tokens"].get<std::vector<int32_t>>(), smp, {.max_tokens = 64},
                    nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, stop_reason::end_of_generation);
  const auto want = c["greedy_tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(g->tokens, std::vector<int32_t>(want.begin(), want.begin() + 10));
  EXPECT_EQ(g->text, ", there was a little girl named Lily");

  smp.reset();
  g = generate(ctx, c["prompt_tokens"].get<std::vector<int32_t>>(), smp,
               {.max_tokens = 64, .ignore_eog = true}, nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->tokens, want);
}

// engine/sequence.h's end rule: the token limit is checked after sampling (max_tokens 1 gives one
// token; 0 is an error), and a full context ends generation once the sampled token has no cell.
TEST_F(stories, the_token_limit_and_a_full_context_end_generation_after_sampling) {
  const auto& c = (*reference_)["cases"][0];
  const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
  const auto want = c["greedy_tokens"].get<std::vector<int32_t>>();
  context ctx(*model_, {.n_ctx = 128});
  sampler smp({.temperature = 0}, ctx.n_vocab());
  auto g = generate(ctx, prompt, smp, {.max_tokens = 1}, nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, stop_reason::max_tokens);
  EXPECT_EQ(g->tokens, std::vector<int32_t>(want.begin(), want.begin() + 1));
  auto none = generate(ctx, prompt, smp, {.max_tokens = 0}, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(), "max_tokens must be >= 1, got 0");

  context small(*model_, {.n_ctx = 16});
  smp.reset();
  g = generate(small, prompt, smp, {.max_tokens = 64}, nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->reason, stop_reason::context_full);
  // Every free cell holds a decoded token, and the last sampled token needs none.
  const size_t n = size_t(small.n_ctx()) - prompt.size() + 1;
  EXPECT_EQ(g->tokens, std::vector<int32_t>(want.begin(), want.begin() + ptrdiff_t(n)));
}

TEST_F(stories, the_same_seed_gives_the_same_sampled_text) {
  context ctx(*model_, {.n_ctx = 128});
  const auto prompt = (*reference_)["cases"][1]["prompt_tokens"].get<std::vector<int32_t>>();
  auto sample = [&](uint64_t seed) {
    sampler smp({.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = seed},
                ctx.n_vocab());
    auto g = generate(ctx, prompt, smp, {.max_tokens = 48}, nullptr);
    EXPECT_TRUE(g.ok());
    return g->tokens;
  };
  EXPECT_EQ(sample(1234), sample(1234));
  EXPECT_NE(sample(1234), sample(99));
}

}  // namespace
}  // namespace hearth
