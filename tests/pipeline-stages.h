// Running a model as pipeline stages in one process, for the tests of issue 55's stages
// (tests/pipeline_stages_test.cpp, tests/pipeline_stages_device_test.cpp): each stage a model
// loaded with its layer range and a context of its own, the residual stream handed from one to
// the next as the wire would carry it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/io/hidden-state.h"
#include "engine/model.h"

namespace hearth::testing {

// One model as consecutive stages, each with its own context.
struct pipeline {
  std::vector<std::unique_ptr<model>> stages;
  std::vector<std::unique_ptr<context>> contexts;

  // Stage i loads ranges[i] with params(i) (the CPU backend when none is given).
  pipeline(const std::string& path, const std::vector<layer_range>& ranges,
           const context_params& cp, const std::function<model_params(size_t)>& params = nullptr) {
    for (size_t i = 0; i < ranges.size(); ++i) {
      model_params mp = params ? params(i) : model_params{};
      mp.layers = ranges[i];
      stages.push_back(model::load(path, mp));
      contexts.push_back(std::make_unique<context>(*stages.back(), cp));
    }
  }

  // The batch through every stage, the hidden states between them as `wire` encodes them; the
  // last stage's logits, in batch order.
  std::vector<float> decode(const std::vector<batch_token>& batch,
                            hidden_encoding wire = hidden_encoding::f32) {
    std::vector<float> hidden;
    for (auto& ctx : contexts) {
      const auto r = ctx->decode(batch, hidden);
      EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
      if (!r.ok()) return {};
      const auto out = ctx->hidden_out();
      hidden.resize(out.size());
      const int64_t n_embd = ctx->model().hparams().n_embd;
      const auto bytes = hidden_encode(wire, out, n_embd);
      EXPECT_TRUE(hidden_decode(wire, bytes, n_embd, hidden).ok());
    }
    const context& last = *contexts.back();
    return {last.logits(0), last.logits(0) + size_t(last.n_logits()) * size_t(last.n_vocab())};
  }
};

inline std::vector<float> decode_whole(context& ctx, const std::vector<batch_token>& batch) {
  const auto r = ctx.decode(batch);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return {ctx.logits(0), ctx.logits(0) + size_t(ctx.n_logits()) * size_t(ctx.n_vocab())};
}

// Cuts [0, n_layer) into `n` ranges as even as can be.
inline std::vector<layer_range> even_split(int32_t n_layer, int32_t n) {
  std::vector<layer_range> out;
  for (int32_t i = 0, first = 0; i < n; ++i) {
    const int32_t end = n_layer * (i + 1) / n;
    out.push_back({first, end});
    first = end;
  }
  return out;
}

inline size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return a.size();
}

// Two sequences' prompts in one batch (every token's logits), then `steps` greedy steps of both
// in one batch each: the split pipeline's logits equal the whole model's, bit for bit.
// Every model (whole and each stage) loads with `params` (the CPU backend by default).
inline void expect_split_exact(const std::string& path, int32_t n_stages, int32_t steps = 8,
                               const model_params& params = {}) {
  SCOPED_TRACE(path + " in " + std::to_string(n_stages) + " stages");
  const context_params cp{.n_ctx = 256, .n_batch = 16, .n_seq_max = 2};
  const auto whole_model = model::load(path, params);
  const int32_t n_layer = whole_model->hparams().n_layer;
  ASSERT_GE(n_layer, n_stages);
  context whole(*whole_model, cp);
  pipeline split(path, even_split(n_layer, n_stages), cp, [&](size_t) { return params; });

  // 21 prompt tokens across two sequences: more than n_batch, so the batch is cut in chunks.
  const int32_t n_vocab = whole_model->hparams().n_vocab;
  std::vector<batch_token> batch;
  for (int32_t i = 0; i < 12; ++i) batch.push_back({(7 + 31 * i) % n_vocab, i, 0, true});
  for (int32_t i = 0; i < 9; ++i) batch.push_back({(3 + 17 * i) % n_vocab, i, 1, true});
  std::vector<int32_t> next_pos = {12, 9};
  for (int32_t step = 0; step <= steps; ++step) {
    const auto want = decode_whole(whole, batch);
    const auto got = split.decode(batch);
    ASSERT_FALSE(want.empty());
    const size_t at = first_difference(want, got);
    ASSERT_EQ(at, want.size()) << "step " << step << ": logit " << at << " differs ("
                               << (at < got.size() ? got[at] : 0.0f) << " split, " << want[at]
                               << " whole)";
    // The next batch: each sequence's greedy token from its last row.
    const int32_t rows = int32_t(want.size() / size_t(n_vocab));
    std::vector<batch_token> next;
    for (int32_t seq = 0; seq < 2; ++seq) {
      int32_t row = -1;
      for (int32_t i = 0; i < rows; ++i) {
        if (batch[size_t(i)].seq == seq) row = i;
      }
      const float* l = want.data() + size_t(row) * size_t(n_vocab);
      const int32_t tok = int32_t(std::max_element(l, l + n_vocab) - l);
      next.push_back({tok, next_pos[size_t(seq)]++, seq, true});
    }
    batch = next;
  }
}

// A prompt (every position's logits) and then `n` greedy tokens of sequence 0, each step's
// token chosen from the previous step's logits: a run follows its own choices, so two runs'
// tokens can be compared. `diff`: the largest prompt-logit difference from `want`, when given.
struct greedy_run {
  std::vector<float> prompt_logits;
  std::vector<int32_t> tokens;
  float diff = 0;
};

inline greedy_run greedy_run_of(
    const std::function<std::vector<float>(const std::vector<batch_token>&)>& decode,
    const std::vector<int32_t>& prompt, int32_t n_vocab, size_t n,
    const std::vector<float>* want = nullptr) {
  std::vector<batch_token> batch;
  for (size_t i = 0; i < prompt.size(); ++i) batch.push_back({prompt[i], int32_t(i), 0, true});
  greedy_run out;
  out.prompt_logits = decode(batch);
  for (size_t i = 0; want && i < want->size() && i < out.prompt_logits.size(); ++i) {
    out.diff = std::max(out.diff, std::fabs(out.prompt_logits[i] - (*want)[i]));
  }
  std::vector<float> logits = out.prompt_logits;
  for (int32_t pos = int32_t(prompt.size()); out.tokens.size() < n && !logits.empty(); ++pos) {
    const float* last = logits.data() + logits.size() - size_t(n_vocab);
    out.tokens.push_back(int32_t(std::max_element(last, last + n_vocab) - last));
    logits = decode({{out.tokens.back(), pos, 0, true}});
  }
  return out;
}

}  // namespace hearth::testing
