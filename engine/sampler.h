// Picking the next token from a row of logits: logit_bias, repetition penalties, a grammar's mask
// (engine/grammar/: forbidden tokens set to -inf), then (unless greedy) top-k, top-p, min-p,
// temperature and a seeded draw, in the order of llama.cpp's default sampler chain
// (common_params_sampling::samplers: logit_bias, penalties, top_k, top_p, min_p, temperature,
// dist). llama.cpp checks its grammar on the drawn token and draws again with the mask when that
// one fails; masking first, as here, is its grammar_first mode (and the same for greedy).
//
// top_p and min_p see the softmax of the surviving candidates at temperature 1, as in llama.cpp,
// where temperature comes after them: min_p keeps logit >= max_logit + log(min_p), which is
// prob >= min_p * max_prob; temperature only reshapes the distribution over what they kept.
//
// Non-finite logits: NaN and -inf tokens are never drawn. If any logit is +inf, the draw is uniform
// over the +inf tokens. If no token is drawable (every logit -inf or NaN after penalties), sample()
// falls back to the argmax with NaN ordered below -inf and ties to the lowest id, i.e. the lowest
// id whose logit is not NaN, or token 0 when all are NaN.
//
// Reproducibility: the draw uses std::mt19937_64 (whose output the standard fixes) and turns its
// raw 64-bit output into a double itself; every sort uses a total order (logit, then id) and the
// selections are our own code, so one seed gives one token sequence with every standard library.
// Only a 1-ulp difference in expf between C libraries could move a draw that lands exactly on a
// boundary between two tokens.
//
// Cost per call, O(n_vocab): a copy of the logits, a partial sort for top_k, and for top_p without
// top_k three linear passes (bucketing by logit, then a quickselect inside one bucket), never a
// full sort. Measured with 151936 tokens on one core of a shared build machine: ~0.1 ms greedy,
// ~0.25 ms with the default parameters, ~1 ms for top_p = 0.95 without top_k.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/generation-params.h"
#include "engine/grammar/grammar-matcher.h"

namespace hearth {

// sampler_params and sampler_params_check (what the sampler can run) are in
// common/generation-params.h, beside the stricter check of requests.

// The log-probabilities of one sampled token as llama-server reports them "before sampling": the
// natural log of the softmax over the logits after logit_bias, the penalties and the grammar's
// mask, before temperature, top-k, top-p and min-p. A token the grammar forbids has -inf.
struct token_logprobs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // most probable first, ties by lower id
};

inline constexpr int32_t sampler_max_top_logprobs = 20;

// One sampler per sequence. Not thread-safe; sample() does not allocate.
class sampler {
 public:
  // Throws std::invalid_argument when sampler_params_check(p) fails or n_vocab < 1.
  sampler(const sampler_params& p, int32_t n_vocab);

  // The next token from raw logits (F32 [n_vocab], not modified). Penalties use the tokens given
  // to accept(); sample() does not record its own pick.
  int32_t sample(const float* logits);

  // Adds a token to the penalty history: prompt tokens if they should count, and every sampled
  // token. Tokens outside [0, n_vocab) are ignored. With a grammar, the first accept() after a
  // sample() also advances the grammar by that token (the prompt's tokens, accepted before any
  // sample(), do not).
  void accept(int32_t token);

  // Constrains every following sample() to the grammar: tokens it forbids are never drawn,
  // end-of-generation tokens only where it can end (and only they once it is complete). When
  // the grammar allows nothing at all (a cap in the matcher dropped every path), sample() returns
  // the first EOG token (the argmax if the vocabulary has none). Throws std::invalid_argument
  // when the grammar_vocab's size is not n_vocab. The grammar_vocab comes from
  // grammar_vocab::make(model's vocab), once per model. set_grammar(nullptr, ...) removes the
  // constraint.
  void set_grammar(std::shared_ptr<const grammar> g, std::shared_ptr<const grammar_vocab> v);
  // The tokens the generation may still produce, this step's included (<= 0: no limit known);
  // engine/sequence sets it before every sample() from max_tokens. Once it is no more than the
  // grammar's shortest completion in bytes + 2 (a token adds at least a byte), only tokens that
  // shorten that completion are drawn, then EOG, so the document ends complete within
  // max_tokens even when the model would go on (a random-weight model inside a string).
  void set_grammar_tokens_left(int32_t n) { grammar_tokens_left_ = n; }

  grammar_matcher* grammar_state() { return matcher_ ? &*matcher_ : nullptr; }

  // The last sample()'s token with its log-probability and the top_n (clamped to
  // [0, sampler_max_top_logprobs]) most probable tokens' (token_logprobs says over what).
  // Computed here from the logits sample() kept, O(n_vocab): sample() does no work for it.
  token_logprobs last_logprobs(int32_t top_n) const;

  // Clears the history and restarts the random sequence from seed().
  void reset();

  // The seed in use (the drawn one when sampler_params::seed was sampler_seed_random).
  uint64_t seed() const { return seed_; }

  const sampler_params& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct candidate {
    float logit;  // penalised
    int32_t id;
    float weight;  // unnormalised probability, exp((logit - max) / t) for the step at hand
  };

  // By logit, ties by id: a total order, so every standard library sorts to the same sequence.
  static bool ranks_before(const candidate& a, const candidate& b) {
    return (a.logit > b.logit) | ((a.logit == b.logit) & (a.id < b.id));
  }
  static constexpr auto by_rank = [](const candidate& a, const candidate& b) {
    return ranks_before(a, b);  // a lambda, unlike a function pointer, inlines into std::sort
  };
  static float max_logit(const candidate* c, size_t n, bool sorted);
  // Sets each weight to exp((logit - max) / temperature) and returns their sum.
  static double set_weights(candidate* c, size_t n, float max, float temperature);
  // Rearranges a[0, n) so that its first k elements are the highest-ranked ones whose weights,
  // added to `above`, first reach `target`, and returns k (n if they never do).
  static size_t select_mass(candidate* a, size_t n, double above, double target);

  void history_push(int32_t token);
  void history_count(int32_t token, int32_t delta);
  void penalize();
  size_t top_p(size_t n_candidates, bool sorted);
  int32_t draw(size_t n_candidates, bool sorted);
  int32_t sample_unconstrained();
  // Sets the grammar's forbidden tokens to -inf; false when it allows none.
  bool apply_grammar();

  sampler_params params_;
  int32_t n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;

  std::vector<float> logits_;  // F32 [n_vocab] copy of the input: biased, penalised, masked
  std::vector<logit_bias_entry> bias_;      // logit_bias without out-of-range tokens, added in turn
  std::optional<grammar_matcher> matcher_;  // copied with the sampler (hearth bench copies them)
  std::shared_ptr<const grammar_vocab> grammar_vocab_;
  bool grammar_pending_ = false;       // sample() ran with a grammar; accept() advances it
  int32_t grammar_tokens_left_ = 0;    // set_grammar_tokens_left; <= 0: no limit known
  int32_t last_token_ = -1;            // the last sample()'s pick, for last_logprobs
  std::vector<candidate> candidates_;  // [n_vocab] capacity; the first n are still in the running
  std::vector<candidate> boundary_;    // [n_vocab] capacity; top-p's boundary bucket
  std::vector<double> bucket_mass_;    // [top_p_buckets] top-p's mass per logit bucket

  // Penalty history: the last repeat_last_n accepted tokens as a ring buffer (not kept when
  // repeat_last_n == -1: nothing leaves the window then), each token's count in the window, and
  // the distinct tokens in it so that penalize() touches only those.
  std::vector<int32_t> window_;        // [<= repeat_last_n], grown by accept() until full
  size_t window_head_ = 0;             // oldest slot, overwritten next once the ring is full
  std::vector<int32_t> count_;         // [n_vocab] occurrences in the window
  std::vector<int32_t> distinct_;      // tokens with count_ > 0, in no particular order
  std::vector<int32_t> distinct_pos_;  // [n_vocab] index into distinct_, -1 when absent
};

}  // namespace hearth
