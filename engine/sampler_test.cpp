#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json-schema.h"

// Counting replacement of the global operator new, to check that sample() does not allocate.
namespace {
std::atomic<bool> g_count_allocs{false};
std::atomic<long> g_allocs{0};
}  // namespace

// noinline: inlined into callers, GCC 12 pairs free() with operator new and warns
// (-Wmismatched-new-delete) although the pair is consistent.
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace hearth {
namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float nan = std::numeric_limits<float>::quiet_NaN();

// Sampling over the full softmax: no top-k, top-p or min-p, no penalties.
sampler_params untruncated(float temperature, uint64_t seed = 1) {
  sampler_params p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = seed;
  return p;
}

std::vector<float> random_logits(int n, uint32_t seed, float scale = 3) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

int32_t argmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max = logits[argmax(logits)];
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int64_t> histogram(sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int64_t> counts(logits.size());
  for (int i = 0; i < draws; ++i) ++counts.at(s.sample(logits.data()));
  return counts;
}

// Pearson chi-square of observed counts against expected probabilities; bins expected to be empty
// must be empty (they return +inf otherwise).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * total;
    if (expected == 0) {
      if (counts[i] != 0) return inf;
      continue;
    }
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

// Critical values with P(chi2_df > x) < 1e-6: a correct sampler fails one check in a million seeds
// (the seeds are fixed, so the tests are deterministic anyway).
constexpr double chi2_crit_df2 = 28.0;  // P = 8.3e-7
constexpr double chi2_crit_df7 = 41.0;  // P = 8.1e-7

TEST(SamplerParams, DefaultsAreValid) {
  EXPECT_EQ(sampler_params_check(sampler_params{}).message, "");
}

TEST(SamplerParams, AcceptsBoundaryValues) {
  sampler_params p;
  p.temperature = -1;  // greedy
  p.top_k = -5;        // off
  p.top_p = 1;
  p.min_p = 0;
  p.repeat_last_n = -1;
  p.frequency_penalty = -2;
  p.presence_penalty = -2;
  p.repeat_penalty = 0.5f;
  EXPECT_EQ(sampler_params_check(p).message, "");
  p.min_p = 1;
  EXPECT_EQ(sampler_params_check(p).message, "");
}

TEST(SamplerParams, RejectsWithTheParameterName) {
  struct bad {
    void (*set)(sampler_params&);
    const char* name;
  };
  const bad cases[] = {
      {[](sampler_params& p) { p.temperature = nan; }, "temperature"},
      {[](sampler_params& p) { p.temperature = inf; }, "temperature"},
      {[](sampler_params& p) { p.top_p = nan; }, "top_p"},
      {[](sampler_params& p) { p.top_p = 0; }, "top_p"},
      {[](sampler_params& p) { p.top_p = -0.5f; }, "top_p"},
      {[](sampler_params& p) { p.top_p = 1.5f; }, "top_p"},
      {[](sampler_params& p) { p.min_p = nan; }, "min_p"},
      {[](sampler_params& p) { p.min_p = -0.01f; }, "min_p"},
      {[](sampler_params& p) { p.min_p = 1.01f; }, "min_p"},
      {[](sampler_params& p) { p.repeat_penalty = nan; }, "repeat_penalty"},
      {[](sampler_params& p) { p.repeat_penalty = 0; }, "repeat_penalty"},
      {[](sampler_params& p) { p.repeat_penalty = -1; }, "repeat_penalty"},
      {[](sampler_params& p) { p.repeat_penalty = inf; }, "repeat_penalty"},
      {[](sampler_params& p) { p.repeat_last_n = -2; }, "repeat_last_n"},
      {[](sampler_params& p) { p.frequency_penalty = nan; }, "frequency_penalty"},
      {[](sampler_params& p) { p.frequency_penalty = -inf; }, "frequency_penalty"},
      {[](sampler_params& p) { p.presence_penalty = nan; }, "presence_penalty"},
      {[](sampler_params& p) { p.presence_penalty = inf; }, "presence_penalty"},
  };
  for (const bad& b : cases) {
    sampler_params p;
    b.set(p);
    const std::string e = sampler_params_check(p).message;
    EXPECT_NE(e.find(b.name), std::string::npos)
        << "expected an error naming " << b.name << ", got \"" << e << "\"";
    EXPECT_THROW(sampler(p, 10), std::invalid_argument) << b.name;
  }
}

TEST(Sampler, RejectsEmptyVocabulary) {
  EXPECT_THROW(sampler(sampler_params{}, 0), std::invalid_argument);
}

TEST(Sampler, GreedyPicksArgmax) {
  for (float temperature : {0.0f, -1.0f}) {
    sampler_params p;
    p.temperature = temperature;
    sampler s(p, 1000);
    for (uint32_t seed = 0; seed < 20; ++seed) {
      const std::vector<float> logits = random_logits(1000, seed);
      EXPECT_EQ(s.sample(logits.data()), argmax(logits));
    }
  }
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  sampler_params p;
  p.temperature = 0;
  sampler s(p, 6);
  const std::vector<float> logits = {1, 3, 2, 3, 3, 0};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(logits.data()), 1);
}

TEST(Sampler, DoesNotModifyLogits) {
  sampler_params p;
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.1f;
  p.seed = 3;
  sampler s(p, 100);
  const std::vector<float> logits = random_logits(100, 7);
  std::vector<float> copy = logits;
  for (int t = 0; t < 100; t += 3) s.accept(t);
  s.sample(copy.data());
  EXPECT_EQ(copy, logits);
}

std::vector<int32_t> sequence(sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(s.sample(logits.data()));
    s.accept(out.back());
  }
  return out;
}

TEST(Sampler, SameSeedSameSequence) {
  const std::vector<float> logits = random_logits(500, 11, 1);
  sampler_params p;  // the defaults: top-k, top-p, min-p and temperature 0.8
  p.repeat_penalty = 1.1f;
  p.seed = 1234;
  sampler a(p, 500), b(p, 500);
  EXPECT_EQ(a.seed(), 1234u);
  const std::vector<int32_t> seq_a = sequence(a, logits, 200);
  EXPECT_EQ(seq_a, sequence(b, logits, 200));
  EXPECT_GT(std::set<int32_t>(seq_a.begin(), seq_a.end()).size(), 20u) << "not random at all";

  a.reset();
  EXPECT_EQ(seq_a, sequence(a, logits, 200)) << "reset() must restart the same sequence";

  p.seed = 1235;
  sampler c(p, 500);
  const std::vector<int32_t> seq_c = sequence(c, logits, 200);
  int same = 0;
  for (int i = 0; i < 200; ++i) same += seq_a[i] == seq_c[i];
  EXPECT_LT(same, 50) << "different seeds gave nearly the same sequence";
}

// Pins the exact draws of one seed, so a change of RNG, of how its output becomes a uniform double,
// or of candidate order (any of which would break reproducibility across versions and machines) is
// noticed. The expected tokens come from an independent Python model: mt19937_64 (checked against
// the standard's 10000th output), u = (x >> 11) * 2^-53, first token whose cumulative exp(l - max)
// exceeds u * sum, in id order.
TEST(Sampler, GoldenSequence) {
  const std::vector<float> logits = {0.5f, 1.0f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.25f};
  sampler s(untruncated(1, 42), 8);
  const std::vector<int32_t> golden = {5, 4, 5, 1, 5, 1, 3, 3, 3, 3, 0, 3,
                                       4, 4, 5, 7, 5, 3, 0, 0, 5, 1, 3, 1};
  std::vector<int32_t> got;
  for (size_t i = 0; i < golden.size(); ++i) got.push_back(s.sample(logits.data()));
  EXPECT_EQ(got, golden);
}

TEST(Sampler, RandomSeedIsDrawnAndReported) {
  sampler a(sampler_params{}, 10), b(sampler_params{}, 10);
  EXPECT_NE(a.seed(), sampler_seed_random);
  EXPECT_NE(a.seed(), b.seed());
}

TEST(Sampler, TopK1IsGreedyAtAnyTemperature) {
  for (float temperature : {0.1f, 1.0f, 10.0f, 1000.0f}) {
    sampler_params p = untruncated(temperature, 5);
    p.top_k = 1;
    sampler s(p, 300);
    for (uint32_t seed = 0; seed < 50; ++seed) {
      const std::vector<float> logits = random_logits(300, seed);
      ASSERT_EQ(s.sample(logits.data()), argmax(logits)) << "temperature " << temperature;
    }
    sampler s4(p, 4);
    const std::vector<float> ties = {0, 2, 1, 2};
    for (int i = 0; i < 100; ++i) ASSERT_EQ(s4.sample(ties.data()), 1);
  }
}

TEST(Sampler, TinyTopPIsGreedy) {
  sampler_params p = untruncated(5, 6);
  p.top_p = 1e-6f;
  sampler s(p, 300);
  for (uint32_t seed = 0; seed < 500; ++seed) {
    const std::vector<float> logits = random_logits(300, seed, 0.5f);
    ASSERT_EQ(s.sample(logits.data()), argmax(logits));
  }
}

TEST(Sampler, MinP1KeepsOnlyTheMaximum) {
  sampler_params p = untruncated(5, 7);
  p.min_p = 1;
  sampler s(p, 300);
  for (uint32_t seed = 0; seed < 500; ++seed) {
    const std::vector<float> logits = random_logits(300, seed, 0.5f);
    ASSERT_EQ(s.sample(logits.data()), argmax(logits));
  }
  // Tied maxima are all kept.
  sampler s4(p, 4);
  const std::vector<float> ties = {0, 2, 1, 2};
  const std::vector<int64_t> counts = histogram(s4, ties, 1000);
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
}

// 100,000 draws of an untruncated sampler at `temperature` follow softmax(logits / temperature);
// the same counts are far from the distribution at `wrong`, so the check has power.
void expect_softmax_at(float temperature, uint64_t seed, double wrong) {
  const std::vector<float> logits = {0.5f, 1.0f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.25f};
  sampler s(untruncated(temperature, seed), 8);
  const std::vector<int64_t> counts = histogram(s, logits, 100000);
  EXPECT_LT(chi_square(counts, softmax(logits, temperature)), chi2_crit_df7);
  EXPECT_GT(chi_square(counts, softmax(logits, wrong)), 10 * chi2_crit_df7);
}

TEST(Sampler, MatchesSoftmaxAtTemperature1) {
  expect_softmax_at(1, 8, 1.1);
}

TEST(Sampler, MatchesSoftmaxAtTemperatureHalf) {
  expect_softmax_at(0.5f, 9, 1);
}

TEST(Sampler, TopKRenormalisesOverTheKept) {
  const std::vector<float> logits = {0.5f, 1.0f, -0.5f, 2.0f, 0.0f, 1.5f, -1.0f, 0.25f};
  sampler_params p = untruncated(1, 10);
  p.top_k = 3;
  sampler s(p, 8);
  const std::vector<int64_t> counts = histogram(s, logits, 100000);
  // Tokens 3, 5, 1 with probabilities proportional to e^2, e^1.5, e^1.
  std::vector<float> top3(8, -inf);
  for (int t : {1, 3, 5}) top3[t] = logits[t];
  EXPECT_LT(chi_square(counts, softmax(top3, 1)), chi2_crit_df2);
}

TEST(Sampler, TopK2NeverYieldsAThirdToken) {
  sampler_params p = untruncated(10, 11);
  p.top_k = 2;
  sampler s(p, 200);
  std::vector<float> logits = random_logits(200, 3, 0.1f);
  logits[17] = 1.0f;
  logits[150] = 0.99f;
  const std::vector<int64_t> counts = histogram(s, logits, 10000);
  EXPECT_GT(counts[17], 0);
  EXPECT_GT(counts[150], 0);
  EXPECT_EQ(counts[17] + counts[150], 10000);
}

// Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
const std::vector<float> four = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};

// top_p sees the temperature-1 probabilities: at temperature 10 the four are nearly uniform and a
// top_p applied after temperature would keep three.
TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  for (float top_p : {0.7f, 0.85f}) {
    sampler_params p = untruncated(10, 12);
    p.top_p = top_p;
    sampler s(p, 4);
    const std::vector<int64_t> counts = histogram(s, four, 10000);
    const int n_kept = top_p == 0.7f ? 2 : 3;  // 0.5 + 0.3 >= 0.7; 0.5 + 0.3 + 0.15 >= 0.85
    for (int t = 0; t < 4; ++t) {
      if (t < n_kept) {
        EXPECT_GT(counts[t], 1000) << "top_p " << top_p << " token " << t;
      } else {
        EXPECT_EQ(counts[t], 0) << "top_p " << top_p << " token " << t;
      }
    }
  }
}

// The kept set of top_p, against a reference that sorts: over hundreds of candidates (where the
// unsorted path buckets and selects instead of sorting) and, with top_k just below the vocabulary
// size, over the sorted path. top_p sits halfway between two cumulative sums, clear of rounding.
// A huge temperature makes the draw near-uniform over the kept set, so 30k draws show every kept
// token (P(one is missed) < 1e-23) and nothing else.
TEST(Sampler, TopPKeptSetMatchesSortedReference) {
  const int n_vocab = 500;
  const std::vector<float> logits = random_logits(n_vocab, 31, 1.5f);
  std::vector<int32_t> order(n_vocab);
  for (int i = 0; i < n_vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t n_kept : {3, 100, 400}) {
    for (int32_t top_k : {0, n_vocab - 1}) {
      std::vector<float> candidates = logits;
      if (top_k > 0) candidates[order.back()] = -inf;  // what top_k removes
      const std::vector<double> probs = softmax(candidates, 1);
      double cumulative = 0;
      for (size_t i = 0; i < n_kept; ++i) cumulative += probs[order[i]];
      const float top_p = static_cast<float>(cumulative - probs[order[n_kept - 1]] / 2);
      std::vector<bool> kept(n_vocab, false);
      for (size_t i = 0; i < n_kept; ++i) kept[order[i]] = true;

      sampler_params p = untruncated(1e4f, 32);
      p.top_p = top_p;
      p.top_k = top_k;
      sampler s(p, n_vocab);
      const std::vector<int64_t> counts = histogram(s, logits, 30000);
      size_t wrong = 0, missed = 0;
      for (int t = 0; t < n_vocab; ++t) {
        wrong += !kept[t] && counts[t] > 0;
        missed += kept[t] && counts[t] == 0;
      }
      EXPECT_EQ(wrong, 0u) << "top_p " << top_p << " top_k " << top_k << " kept " << n_kept;
      EXPECT_EQ(missed, 0u) << "top_p " << top_p << " top_k " << top_k << " kept " << n_kept;
    }
  }
}

// Equal logits all fall in one bucket; ties rank by id, so top_p = 0.5005 keeps ids 0..500.
TEST(Sampler, TopPOnEqualLogitsKeepsLowestIds) {
  const std::vector<float> logits(1000, 0.25f);
  sampler_params p = untruncated(1, 33);
  p.top_p = 0.5005f;
  sampler s(p, 1000);
  const std::vector<int64_t> counts = histogram(s, logits, 20000);
  for (int t = 0; t < 1000; ++t) {
    if (t <= 500) {
      ASSERT_GT(counts[t], 0) << t;
    } else {
      ASSERT_EQ(counts[t], 0) << t;
    }
  }
}

// min_p = 0.25 keeps p >= 0.125 of the temperature-1 distribution: tokens 0, 1, 2. After
// temperature 10 every token would pass.
TEST(Sampler, MinPAppliesBeforeTemperature) {
  sampler_params p = untruncated(10, 13);
  p.min_p = 0.25f;
  sampler s(p, 4);
  const std::vector<int64_t> counts = histogram(s, four, 10000);
  EXPECT_GT(counts[0], 1000);
  EXPECT_GT(counts[1], 1000);
  EXPECT_GT(counts[2], 1000);
  EXPECT_EQ(counts[3], 0);
}

sampler_params greedy_with_penalties(float repeat, float frequency, float presence,
                                     int32_t last_n = 64) {
  sampler_params p;
  p.temperature = 0;
  p.repeat_penalty = repeat;
  p.frequency_penalty = frequency;
  p.presence_penalty = presence;
  p.repeat_last_n = last_n;
  return p;
}

TEST(Sampler, RepeatPenaltyDividesPositiveLogits) {
  const std::vector<float> logits = {2.0f, 1.8f, 0.0f};
  sampler s(greedy_with_penalties(1.5f, 0, 0), 3);
  EXPECT_EQ(s.sample(logits.data()), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);  // 2 / 1.5 < 1.8
}

TEST(Sampler, RepeatPenaltyMultipliesNegativeLogits) {
  // Dividing -1 by 1.5 would raise it above -1.2 and keep token 0.
  const std::vector<float> logits = {-1.0f, -1.2f, -5.0f};
  sampler s(greedy_with_penalties(1.5f, 0, 0), 3);
  EXPECT_EQ(s.sample(logits.data()), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);  // -1 * 1.5 < -1.2
}

TEST(Sampler, RepeatPenaltyIgnoresCount) {
  const std::vector<float> logits = {2.0f, 1.2f};
  sampler s(greedy_with_penalties(1.5f, 0, 0), 2);
  for (int i = 0; i < 5; ++i) s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 0);  // 2 / 1.5 once, not 2 / 1.5^5
}

TEST(Sampler, FrequencyPenaltyScalesWithCount) {
  const std::vector<float> logits = {1.0f, 0.5f};
  sampler s(greedy_with_penalties(1, 0.3f, 0), 2);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 0);  // 1 - 0.3 > 0.5
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);  // 1 - 0.6 < 0.5
}

TEST(Sampler, PresencePenaltyIgnoresCount) {
  const std::vector<float> logits = {1.0f, 0.5f};
  sampler low(greedy_with_penalties(1, 0, 0.4f), 2);
  sampler high(greedy_with_penalties(1, 0, 0.6f), 2);
  for (int i = 0; i < 3; ++i) {
    low.accept(0);
    high.accept(0);
  }
  EXPECT_EQ(low.sample(logits.data()),
            0);                              // 1 - 0.4 > 0.5 however often 0 was seen
  EXPECT_EQ(high.sample(logits.data()), 1);  // 1 - 0.6 < 0.5
}

TEST(Sampler, PenaltiesCombine) {
  // llama.cpp order: repeat penalty, then count * frequency + presence.
  // 2 / 2 - 2 * 0.1 - 0.3 = 0.5 < 0.6
  const std::vector<float> logits = {2.0f, 0.6f, 0.4f};
  sampler s(greedy_with_penalties(2, 0.1f, 0.3f), 3);
  s.accept(0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);
}

// Token 0 is penalised only while it is inside the last repeat_last_n accepted tokens.
TEST(Sampler, PenaltyWindow) {
  const std::vector<float> logits = {1.0f, 0.9f, -5.0f};
  const auto pick_after = [&](int32_t last_n, const std::vector<int32_t>& history) {
    sampler s(greedy_with_penalties(1, 0, 0.5f, last_n), 3);
    for (int32_t t : history) s.accept(t);
    return s.sample(logits.data());
  };
  EXPECT_EQ(pick_after(2, {0, 2, 2}), 0);  // 0 has left the window
  EXPECT_EQ(pick_after(3, {0, 2, 2}), 1);
  EXPECT_EQ(pick_after(-1, {0, 2, 2}), 1);
  EXPECT_EQ(pick_after(0, {0, 2, 2}), 0);  // penalties off
  // The ring wraps many times; 0 reenters and leaves again.
  std::vector<int32_t> history;
  for (int i = 0; i < 50; ++i) history.insert(history.end(), {0, 2, 2, 2});
  EXPECT_EQ(pick_after(3, history), 0);
  history.push_back(0);
  EXPECT_EQ(pick_after(3, history), 1);
  history.insert(history.end(), {2, 2, 2});
  EXPECT_EQ(pick_after(3, history), 0);
  EXPECT_EQ(pick_after(-1, history), 1);
  EXPECT_EQ(pick_after(1000, history), 1);
}

// Which tokens the sampler penalises, seen through greedy picks: with presence penalty 1, token t
// at 0.5 among zeros is picked only if it is not penalised (the last token must never have been
// accepted, so that one zero always stays).
std::vector<bool> penalised(sampler& s, int n_vocab) {
  std::vector<bool> out(n_vocab);
  std::vector<float> logits(n_vocab, 0.0f);
  for (int t = 0; t < n_vocab; ++t) {
    logits[t] = 0.5f;
    out[t] = s.sample(logits.data()) != t;
    logits[t] = 0;
  }
  return out;
}

// A long random history against a reference window, after every accept.
TEST(Sampler, PenaltyWindowMatchesReference) {
  const int n_vocab = 12;  // history from the first 11
  for (int32_t last_n : {1, 3, 7, -1}) {
    sampler s(greedy_with_penalties(1, 0, 1, last_n), n_vocab);
    std::vector<int32_t> history;
    std::mt19937 rng(last_n + 100);
    for (int step = 0; step < 300; ++step) {
      const int32_t t = static_cast<int32_t>(rng() % (n_vocab - 1));
      s.accept(t);
      history.push_back(t);
      std::vector<bool> expected(n_vocab, false);
      const size_t from =
          last_n < 0 ? 0 : history.size() - std::min<size_t>(history.size(), last_n);
      for (size_t i = from; i < history.size(); ++i) expected[history[i]] = true;
      ASSERT_EQ(penalised(s, n_vocab), expected) << "last_n " << last_n << " step " << step;
    }
  }
}

TEST(Sampler, FrequencyCountsOnlyTheWindow) {
  const std::vector<float> logits = {1.0f, 0.5f};
  // Window of 2 over {0, 0, 0}: count 2, 1 - 2 * 0.3 < 0.5. A count of 1 would keep token 0; a
  // count of 3 would too with frequency 0.2 below.
  sampler s(greedy_with_penalties(1, 0.3f, 0, 2), 2);
  for (int i = 0; i < 3; ++i) s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);
  sampler t(greedy_with_penalties(1, 0.2f, 0, 2), 2);
  for (int i = 0; i < 3; ++i) t.accept(0);
  EXPECT_EQ(t.sample(logits.data()),
            0);  // 1 - 2 * 0.2 > 0.5; 1 - 3 * 0.2 would not be
}

TEST(Sampler, ResetClearsHistory) {
  const std::vector<float> logits = {1.0f, 0.9f};
  sampler s(greedy_with_penalties(1, 0, 0.5f), 2);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);
  s.reset();
  EXPECT_EQ(s.sample(logits.data()), 0);
}

TEST(Sampler, IgnoresOutOfRangeTokens) {
  const std::vector<float> logits = {1.0f, 0.9f};
  sampler s(greedy_with_penalties(1, 0, 0.5f), 2);
  s.accept(-1);
  s.accept(2);
  s.accept(1 << 30);
  EXPECT_EQ(s.sample(logits.data()), 0);
}

TEST(Sampler, NeverPicksMinusInfOrNaN) {
  std::vector<float> logits = random_logits(64, 21, 1);
  std::vector<bool> allowed(64, true);
  for (int t = 0; t < 64; t += 2) {
    logits[t] = t % 4 == 0 ? -inf : nan;
    allowed[t] = false;
  }
  for (float temperature : {0.0f, 0.01f, 1.0f, 1e6f}) {
    for (int32_t top_k : {0, 5, 63}) {
      sampler_params p = untruncated(temperature, 22);
      p.top_k = top_k;
      p.top_p = 0.99f;
      sampler s(p, 64);
      for (int i = 0; i < 2000; ++i) {
        const int32_t t = s.sample(logits.data());
        ASSERT_TRUE(allowed.at(t)) << "picked " << t << " at temperature " << temperature;
      }
    }
  }
}

TEST(Sampler, PlusInfIsUniformOverInfTokens) {
  const std::vector<float> logits = {0.0f, inf, 5.0f, inf, nan};
  for (float temperature : {0.0f, 1.0f}) {
    sampler s(untruncated(temperature, 23), 5);
    const std::vector<int64_t> counts = histogram(s, logits, 1000);
    EXPECT_EQ(counts[1] + counts[3], 1000);
    if (temperature > 0) {
      EXPECT_GT(counts[1], 300);
      EXPECT_GT(counts[3], 300);
    } else {
      EXPECT_EQ(counts[1], 1000);  // greedy: lowest id among the maxima
    }
  }
}

TEST(Sampler, NothingDrawableFallsBackToLowestNonNaN) {
  for (float temperature : {0.0f, 1.0f}) {
    sampler s(untruncated(temperature, 24), 4);
    const std::vector<float> all_minus_inf(4, -inf);
    EXPECT_EQ(s.sample(all_minus_inf.data()), 0);
    const std::vector<float> all_nan(4, nan);
    EXPECT_EQ(s.sample(all_nan.data()), 0);
    const std::vector<float> mixed = {nan, nan, -inf, -inf};
    EXPECT_EQ(s.sample(mixed.data()), 2);
  }
}

TEST(Sampler, ExtremeTemperaturesStayFinite) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -3e38f, 3e38f};
  sampler tiny(untruncated(1e-30f, 25), 5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(tiny.sample(logits.data()), 4);
  const std::vector<float> small = {1.0f, 3.0f, 2.0f};
  sampler tiny2(untruncated(1e-30f, 25), 3);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(tiny2.sample(small.data()), 1);
}

TEST(Sampler, SampleDoesNotAllocate) {
  const int n_vocab = 50000;
  const std::vector<float> logits = random_logits(n_vocab, 26, 2);
  sampler_params p;
  p.top_k = 0;  // top-p then sorts a growing prefix
  p.top_p = 0.9f;
  p.repeat_penalty = 1.2f;
  p.frequency_penalty = 0.1f;
  p.seed = 27;
  sampler s(p, n_vocab);
  std::vector<int32_t> picks(200);
  for (int i = 0; i < 200; ++i) s.accept(i * 7);
  s.sample(logits.data());
  g_allocs = 0;
  g_count_allocs = true;
  for (int32_t& t : picks) t = s.sample(logits.data());
  g_count_allocs = false;
  EXPECT_EQ(g_allocs.load(), 0);
  EXPECT_GT(std::set<int32_t>(picks.begin(), picks.end()).size(), 10u);
}

TEST(Sampler, LogitBiasBansAndForces) {
  const std::vector<float> logits = random_logits(50, 7);
  const int32_t best = argmax(logits);
  sampler_params p = untruncated(0);
  p.logit_bias = {{best, -100}, {999, 100}, {-1, 100}};  // out-of-range tokens are ignored
  sampler ban(p, 50);
  EXPECT_NE(ban.sample(logits.data()), best);
  p.logit_bias = {{3, 100}};
  sampler force(p, 50);
  EXPECT_EQ(force.sample(logits.data()), 3);
  // At temperature 1 as well: +100 leaves the other tokens ~e^-80 of the mass.
  p = untruncated(1, 5);
  p.logit_bias = {{11, 100}};
  sampler warm(p, 50);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(warm.sample(logits.data()), 11);
  // Non-finite biases are refused.
  p.logit_bias = {{1, std::numeric_limits<float>::quiet_NaN()}};
  EXPECT_THROW(sampler(p, 50), std::invalid_argument);
}

TEST(Sampler, LogprobsAreTheSoftmaxBeforeTemperature) {
  const std::vector<float> logits = random_logits(300, 9);
  sampler_params p;  // top-k 40, top-p, min-p and temperature 0.8 do not change the log-probs
  p.seed = 3;
  p.logit_bias = {{17, 2.5f}};
  sampler s(p, 300);
  const int32_t t = s.sample(logits.data());
  std::vector<float> biased = logits;
  biased[17] += 2.5f;
  const std::vector<double> ref = softmax(biased, 1.0);
  const token_logprobs lp = s.last_logprobs(5);
  EXPECT_EQ(lp.token, t);
  EXPECT_NEAR(lp.logprob, std::log(ref[size_t(t)]), 1e-4);
  ASSERT_EQ(lp.top.size(), 5u);
  std::vector<int32_t> order(300);
  for (int32_t i = 0; i < 300; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return ref[size_t(a)] > ref[size_t(b)]; });
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lp.top[i].first, order[i]);
    EXPECT_NEAR(lp.top[i].second, std::log(ref[size_t(order[i])]), 1e-4);
  }
  EXPECT_EQ(s.last_logprobs(1000).top.size(), size_t(sampler_max_top_logprobs));
  EXPECT_TRUE(s.last_logprobs(0).top.empty());
  EXPECT_EQ(sampler(p, 300).last_logprobs(3).token, -1);  // nothing sampled yet
}

// A vocabulary of JSON-ish pieces and random logits: whatever the draws, the text is a document
// the schema accepts, and ends with EOG.
TEST(Sampler, GrammarConstrainsRandomDrawsToAValidDocument) {
  std::vector<std::string> pieces = {
      "{",   "}",         "\"",   "\":", ",",     " ",     "\n",   "a",  "b", "é",
      "1",   "0",         "-",    ".",   "true",  "false", "null", "[",  "]", "\"name",
      "\"n", "ame\": \"", "x\"}", "{\"", "<eos>", "9",     "e",    "\\", "f"};
  const int32_t eos = 24;
  // Every printable ASCII character alone too, as real vocabularies have: a grammar can only be
  // followed where the vocabulary can spell what it needs.
  for (char c = ' '; c < 127; ++c) pieces.push_back(std::string(1, c));
  auto gv = grammar_vocab::make(pieces, {eos});
  auto gbnf = json_schema_to_gbnf(R"({"type": "object", "additionalProperties": false,
    "properties": {"name": {"type": "string", "maxLength": 5}, "n": {"type": "integer",
    "minimum": -5, "maximum": 90}, "f": {"type": "array", "items": {"type": "boolean"},
    "maxItems": 3}}, "required": ["name", "n", "f"]})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok()) << g.message();
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    sampler s(untruncated(1.5f, seed), int32_t(pieces.size()));
    s.set_grammar(*g, gv);
    s.accept(7);  // a prompt token: does not move the grammar
    std::string text;
    int32_t t = -1;
    for (int step = 0; step < 2000; ++step) {
      const std::vector<float> logits =
          random_logits(int(pieces.size()), uint32_t(seed * 1000 + step));
      t = s.sample(logits.data());
      const token_logprobs lp = s.last_logprobs(3);
      EXPECT_GT(lp.logprob, -std::numeric_limits<float>::infinity());
      s.accept(t);
      if (t == eos) break;
      text += pieces[size_t(t)];
    }
    ASSERT_EQ(t, eos) << "seed " << seed << ": " << text;
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_LE(doc["name"].get<std::string>().size(), 10u) << text;  // 5 characters, é 2 bytes
    EXPECT_GE(doc["n"].get<int>(), -5) << text;
    EXPECT_LE(doc["n"].get<int>(), 90) << text;
    EXPECT_LE(doc["f"].size(), 3u) << text;
    EXPECT_EQ(doc.size(), 3u) << text;
  }
}

TEST(Sampler, GrammarMasksLogprobsAndGreedy) {
  std::vector<std::string> pieces = {"a", "b", "c", "<eos>"};
  auto gv = grammar_vocab::make(pieces, {3});
  auto g = grammar_from_gbnf("root ::= \"b\" \"c\"");
  ASSERT_TRUE(g.ok());
  sampler s(untruncated(0), 4);
  s.set_grammar(*g, gv);
  const std::vector<float> logits = {5, 1, 0, 9};
  EXPECT_EQ(s.sample(logits.data()), 1);
  const token_logprobs lp = s.last_logprobs(4);
  EXPECT_NEAR(lp.logprob, 0, 1e-6);  // the only allowed token
  ASSERT_EQ(lp.top.size(), 1u);      // forbidden tokens have no probability
  s.accept(1);
  sampler copy = s;  // continues from the same text, on its own
  EXPECT_EQ(copy.sample(logits.data()), 2);
  copy.accept(2);
  EXPECT_EQ(copy.sample(logits.data()), 3);
  EXPECT_EQ(s.sample(logits.data()), 2);
  s.accept(2);
  EXPECT_EQ(s.sample(logits.data()), 3);  // complete: only EOG
  s.accept(3);
  EXPECT_THROW(s.set_grammar(*g, grammar_vocab::make({"a"}, {})), std::invalid_argument);
  s.reset();
  EXPECT_EQ(s.sample(logits.data()), 1);  // reset restarts the grammar
}

TEST(Sampler, GrammarBudgetEndsTheDocumentInTime) {
  // A string the random draws would rarely close: with 30 tokens to go, the wrap-up picks
  // tokens that shorten the shortest completion, and the document ends complete within it.
  std::vector<std::string> pieces = {"<eos>", "\"", "}", "{\"a\": \"", "\\"};
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back(std::string(1, c));
  for (const char* p : {"xyz", "hello", "world", " ", ":", ",", "\": \"", "\"}"})
    pieces.push_back(p);
  auto gv = grammar_vocab::make(pieces, {0});
  auto gbnf = json_schema_to_gbnf(R"({"type": "object", "properties": {"a": {"type": "string"},
    "b": {"type": "string"}}, "required": ["a", "b"], "additionalProperties": false})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.message();
  auto g = grammar_from_gbnf(*gbnf);
  ASSERT_TRUE(g.ok());
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    sampler s(untruncated(1, seed), int32_t(pieces.size()));
    s.set_grammar(*g, gv);
    std::string text;
    int32_t t = -1, n = 0;
    for (; n < 30; ++n) {
      s.set_grammar_tokens_left(30 - n);
      // Logits that favour letters: left alone, the string goes on.
      std::vector<float> logits = random_logits(int(pieces.size()), uint32_t(seed * 100 + n));
      for (size_t i = 5; i < 31; ++i) logits[i] += 8;
      t = s.sample(logits.data());
      s.accept(t);
      if (t == 0) break;
      text += pieces[size_t(t)];
    }
    ASSERT_EQ(t, 0) << "seed " << seed << ": " << text;
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_TRUE(doc["a"].is_string() && doc["b"].is_string()) << text;
  }
}

}  // namespace
}  // namespace hearth
