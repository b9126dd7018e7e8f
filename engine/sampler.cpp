#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

namespace hearth {

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

// top-p buckets the candidates by logit over this many nats below the max.
constexpr size_t top_p_buckets = 512;
constexpr float top_p_bucket_range = 32;

// Index of the largest value with NaN ordered below -inf; ties go to the lowest index.
int32_t argmax_nan_lowest(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (!std::isnan(v[i]) && (std::isnan(v[best]) || v[i] > v[best])) best = i;
  }
  return best;
}

}  // namespace

sampler::sampler(const sampler_params& p, int32_t n_vocab) : params_(p), n_vocab_(n_vocab) {
  if (auto e = sampler_params_check(p); !e.ok()) throw std::invalid_argument(e.message);
  if (n_vocab < 1) {
    throw std::invalid_argument("sampler: n_vocab must be >= 1, got " + std::to_string(n_vocab));
  }
  seed_ = p.seed;
  if (seed_ == sampler_seed_random) {
    std::random_device rd;
    while (seed_ == sampler_seed_random) seed_ = (uint64_t{rd()} << 32) ^ rd();
  }
  rng_.seed(seed_);
  for (const logit_bias_entry& b : p.logit_bias) {
    if (b.token >= 0 && b.token < n_vocab) bias_.push_back(b);
  }

  logits_.resize(n_vocab);
  candidates_.resize(n_vocab);
  if (p.top_p < 1) {
    boundary_.resize(n_vocab);
    bucket_mass_.resize(top_p_buckets);
  }
  count_.assign(n_vocab, 0);
  distinct_pos_.assign(n_vocab, -1);
  if (p.repeat_last_n > 0) {
    distinct_.reserve(std::min(n_vocab, p.repeat_last_n));
  } else if (p.repeat_last_n == -1) {
    distinct_.reserve(n_vocab);
  }
}

float sampler::max_logit(const candidate* c, size_t n, bool sorted) {
  if (sorted) return c[0].logit;
  float max = c[0].logit;
  for (size_t i = 1; i < n; ++i) max = std::max(max, c[i].logit);
  return max;
}

double sampler::set_weights(candidate* c, size_t n, float max, float temperature) {
  // Subtracting the max before dividing keeps a tiny temperature from making inf - inf. Four
  // running sums let the exp calls overlap; their fixed order keeps the total reproducible.
  double sum[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (size_t j = 0; j < 4; ++j) {
      sum[j] += c[i + j].weight = std::exp((c[i + j].logit - max) / temperature);
    }
  }
  for (; i < n; ++i) sum[0] += c[i].weight = std::exp((c[i].logit - max) / temperature);
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

void sampler::history_count(int32_t token, int32_t delta) {
  const int32_t before = count_[token];
  count_[token] += delta;
  if (before == 0) {
    distinct_pos_[token] = static_cast<int32_t>(distinct_.size());
    distinct_.push_back(token);  // never reallocates: reserved for every possible token
  } else if (count_[token] == 0) {
    const int32_t pos = distinct_pos_[token];
    const int32_t moved = distinct_.back();
    distinct_[pos] = moved;
    distinct_pos_[moved] = pos;
    distinct_.pop_back();
    distinct_pos_[token] = -1;
  }
}

void sampler::history_push(int32_t token) {
  if (params_.repeat_last_n == -1) {
    history_count(token, +1);
    return;
  }
  const size_t capacity = static_cast<size_t>(params_.repeat_last_n);
  if (window_.size() < capacity) {
    window_.push_back(token);
  } else {
    history_count(window_[window_head_], -1);
    window_[window_head_] = token;
    window_head_ = (window_head_ + 1) % capacity;
  }
  history_count(token, +1);
}

void sampler::accept(int32_t token) {
  if (grammar_pending_) {
    grammar_pending_ = false;
    matcher_->accept(token);  // a token the grammar refuses (not one sample() drew) leaves it be
  }
  if (token < 0 || token >= n_vocab_ || params_.repeat_last_n == 0) return;
  history_push(token);
}

void sampler::reset() {
  for (int32_t t : distinct_) {
    count_[t] = 0;
    distinct_pos_[t] = -1;
  }
  distinct_.clear();
  window_.clear();
  window_head_ = 0;
  rng_.seed(seed_);
  if (matcher_) matcher_->reset();
  grammar_pending_ = false;
  last_token_ = -1;
}

void sampler::set_grammar(std::shared_ptr<const grammar> g,
                          std::shared_ptr<const grammar_vocab> v) {
  grammar_pending_ = false;
  if (!g || !v) {
    matcher_.reset();
    grammar_vocab_.reset();
    return;
  }
  if (v->n_tokens() != n_vocab_) {
    throw std::invalid_argument("sampler: the grammar's vocabulary has " +
                                std::to_string(v->n_tokens()) + " tokens, the model " +
                                std::to_string(n_vocab_));
  }
  grammar_vocab_ = v;
  matcher_.emplace(std::move(g), std::move(v));
}

bool sampler::apply_grammar() {
  const bool wrap_up =
      grammar_tokens_left_ > 0 && grammar_tokens_left_ <= matcher_->min_completion() + 2;
  const std::span<const uint64_t> mask =
      wrap_up ? matcher_->allowed_shortening() : matcher_->allowed();
  bool any = false;
  for (size_t w = 0; w < mask.size(); ++w) {
    const uint64_t bits = mask[w];
    any |= bits != 0;
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(size_t(n_vocab_), w * 64 + 64);
    for (size_t t = w * 64; t < end; ++t) {
      if (!((bits >> (t % 64)) & 1)) logits_[t] = -inf;
    }
  }
  return any;
}

token_logprobs sampler::last_logprobs(int32_t top_n) const {
  token_logprobs out;
  out.token = last_token_;
  if (last_token_ < 0) return out;
  top_n = std::clamp(top_n, 0, sampler_max_top_logprobs);
  float max = -inf;
  for (float l : logits_) {
    if (l > max) max = l;  // NaN never compares greater
  }
  if (max == -inf || max == inf) {
    // Nothing drawable, or +inf logits (a draw among those alone): no finite distribution.
    out.logprob = logits_[size_t(last_token_)] == inf ? 0.0f : -inf;
    return out;
  }
  double sum = 0;
  for (float l : logits_) {
    if (l > -inf) sum += std::exp(double(l) - max);
  }
  const float log_z = float(double(max) + std::log(sum));
  const auto logprob = [&](float l) { return l > -inf ? l - log_z : -inf; };
  out.logprob = logprob(logits_[size_t(last_token_)]);
  // The top_n by logit, ties by lower id, kept in a small sorted array.
  std::vector<std::pair<int32_t, float>>& top = out.top;
  const auto better = [](float la, int32_t a, float lb, int32_t b) {
    return la > lb || (la == lb && a < b);
  };
  for (int32_t t = 0; t < n_vocab_ && top_n > 0; ++t) {
    const float l = logits_[size_t(t)];
    if (!(l > -inf)) continue;
    if (top.size() == size_t(top_n) && !better(l, t, top.back().second, top.back().first)) {
      continue;
    }
    if (top.size() == size_t(top_n)) top.pop_back();
    auto at = std::find_if(top.begin(), top.end(),
                           [&](const auto& x) { return better(l, t, x.second, x.first); });
    top.insert(at, {t, l});
  }
  for (auto& x : top) x.second = logprob(x.second);
  return out;
}

void sampler::penalize() {
  const float repeat = params_.repeat_penalty;
  const float frequency = params_.frequency_penalty;
  const float presence = params_.presence_penalty;
  if (repeat == 1 && frequency == 0 && presence == 0) return;
  for (int32_t t : distinct_) {
    float& l = logits_[t];
    if (repeat != 1) l = l > 0 ? l / repeat : l * repeat;
    l -= static_cast<float>(count_[t]) * frequency + presence;
  }
}

int32_t sampler::sample(const float* logits) {
  std::copy(logits, logits + n_vocab_, logits_.begin());
  for (const logit_bias_entry& b : bias_) logits_[size_t(b.token)] += b.bias;
  penalize();
  if (matcher_) {
    grammar_pending_ = true;
    if (!apply_grammar()) {
      const std::vector<int32_t>& eog = grammar_vocab_->eog();
      last_token_ = eog.empty() ? argmax_nan_lowest(logits, n_vocab_) : eog[0];
      return last_token_;
    }
  }
  last_token_ = sample_unconstrained();
  return last_token_;
}

int32_t sampler::sample_unconstrained() {
  if (params_.temperature <= 0) return argmax_nan_lowest(logits_.data(), n_vocab_);

  // Candidates in id order. NaN and -inf never enter; +inf tokens, if any, are the only ones and
  // share one logit, so the draw is uniform over them.
  candidate* c = candidates_.data();
  size_t n = 0;
  const bool any_pos_inf = std::find(logits_.begin(), logits_.end(), inf) != logits_.end();
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float l = logits_[i];
    if (any_pos_inf ? l == inf : l > -inf) c[n++] = {any_pos_inf ? 0.0f : l, i, 0};
  }
  if (n == 0) return argmax_nan_lowest(logits_.data(), n_vocab_);

  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    std::partial_sort(c, c + params_.top_k, c + n, by_rank);
    n = static_cast<size_t>(params_.top_k);
    sorted = true;
  }

  if (params_.top_p < 1 && n > 1) n = top_p(n, sorted);

  if (params_.min_p > 0 && n > 1) {
    const double min_logit = max_logit(c, n, sorted) + std::log(double{params_.min_p});
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (c[i].logit >= min_logit) c[kept++] = c[i];  // keeps the order, sorted or not
    }
    n = kept;
  }

  return draw(n, sorted);
}

// Keeps the smallest set of highest-probability candidates whose probability (softmax at
// temperature 1) adds up to top_p, and returns its size; the set is moved to the front.
size_t sampler::top_p(size_t n, bool sorted) {
  candidate* c = candidates_.data();
  const float max = max_logit(c, n, sorted);
  const double target = params_.top_p * set_weights(c, n, max, 1.0f);

  if (sorted) {
    double cumulative = 0;
    for (size_t i = 0; i < n; ++i) {
      cumulative += c[i].weight;
      if (cumulative >= target) return i + 1;
    }
    return n;  // rounding kept the sum below target
  }

  // Unsorted, and possibly most of the vocabulary: no sort. Bucket the candidates by logit below
  // the max (1/16 nat wide; the last takes everything further down, where a weight is < 1e-13),
  // find the bucket where the mass reaches target, keep the buckets above it and select within it.
  // Three linear passes without data-dependent branches; the result, and the order the draw
  // walks, comes from our code alone and so is the same on every platform.
  const auto bucket_of = [max](float logit) {
    const float d = (max - logit) * (top_p_buckets / top_p_bucket_range);
    return d < top_p_buckets - 1 ? static_cast<size_t>(d) : top_p_buckets - 1;
  };
  double* mass = bucket_mass_.data();
  std::fill_n(mass, top_p_buckets, 0.0);
  for (size_t i = 0; i < n; ++i) mass[bucket_of(c[i].logit)] += c[i].weight;
  size_t boundary = 0;
  double above = 0;
  while (boundary < top_p_buckets && above + mass[boundary] < target) above += mass[boundary++];
  if (boundary == top_p_buckets) return n;  // rounding kept the sum below target

  candidate* b = boundary_.data();
  size_t kept = 0, n_b = 0;
  for (size_t i = 0; i < n; ++i) {
    const candidate x = c[i];
    const size_t k = bucket_of(x.logit);
    c[kept] = x;  // kept <= i: overwrites a candidate already read
    kept += k < boundary;
    b[n_b] = x;
    n_b += k == boundary;
  }
  const size_t n_b_kept = select_mass(b, n_b, above, target);
  std::copy(b, b + n_b_kept, c + kept);
  return kept + n_b_kept;
}

size_t sampler::select_mass(candidate* a, size_t n, double above, double target) {
  // Quickselect on mass. Invariant: [0, lo) ranks above [lo, hi), which ranks above [hi, n);
  // `above` includes the mass of [0, lo) and stays below target.
  size_t lo = 0, hi = n;
  int budget = 2 * std::bit_width(n) + 8;  // then sort: bounds the quadratic worst case
  while (lo < hi) {
    if (--budget == 0) {
      std::sort(a + lo, a + hi, by_rank);
      for (size_t i = lo; i < hi; ++i) {
        above += a[i].weight;
        if (above >= target) return i + 1;
      }
      return n;
    }
    // Median of three as pivot, parked at hi - 1.
    const size_t mid = lo + (hi - lo) / 2;
    if (ranks_before(a[hi - 1], a[lo])) std::swap(a[lo], a[hi - 1]);
    if (ranks_before(a[mid], a[lo])) std::swap(a[mid], a[lo]);
    if (ranks_before(a[hi - 1], a[mid])) std::swap(a[mid], a[hi - 1]);
    std::swap(a[mid], a[hi - 1]);
    const candidate pivot = a[hi - 1];
    size_t split = lo;
    double mass = 0;
    for (size_t i = lo; i + 1 < hi; ++i) {
      if (ranks_before(a[i], pivot)) {
        mass += a[i].weight;
        std::swap(a[i], a[split++]);
      }
    }
    std::swap(a[split], a[hi - 1]);  // [lo, split) above the pivot, now at split
    if (above + mass >= target) {
      hi = split;
    } else if (above + mass + pivot.weight >= target) {
      return split + 1;
    } else {
      above += mass + pivot.weight;
      lo = split + 1;
    }
  }
  return n;  // rounding kept the sum below target
}

int32_t sampler::draw(size_t n, bool sorted) {
  candidate* c = candidates_.data();
  const double total = set_weights(c, n, max_logit(c, n, sorted), params_.temperature);
  // 53 random bits -> a double uniform in [0, 1); the same on every platform.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cumulative = 0;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (c[i].weight <= 0) continue;
    cumulative += c[i].weight;
    last = i;
    if (target < cumulative) return c[i].id;
  }
  return c[last].id;  // u * total rounded up to total
}

}  // namespace hearth
