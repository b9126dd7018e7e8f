// An inference context: a KV cache shared by several independent sequences, and decode() to run
// batches of tokens through the model. A sequence can be cleared and its cells reused; results
// are then exactly those of a fresh context.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/forward.h"
#include "engine/model.h"

namespace hearth {

struct context_params {
  int32_t n_ctx =
      0;  // cache cells across all sequences; 0: the model's training context (at most 4096)
  int32_t n_batch = 512;  // tokens per forward pass; longer batches are split
  int32_t n_seq_max = 1;  // sequence ids accepted: [0, n_seq_max)
};

// What a context with these parameters holds, filled in as the context does: n_ctx 0 becomes the
// model's training context (at most 4096), n_batch is clamped to [1, n_ctx].
context_params context_params_resolved(const model_hparams& hp, const context_params& p);

// Memory a model takes with a context of `p`, counted as the context and the loader allocate
// them: the one estimate placement (backends/select.h), the context's own check and the node's
// memory budget use.
struct memory_estimate {
  uint64_t weights = 0;  // every tensor of the file
  uint64_t cache = 0;    // KV cache: F16 keys and values of every layer, each cell's seq and pos
  // One batch's F32 activations (twice: the backends' own scratch) and per-token inputs.
  uint64_t scratch = 0;
  uint64_t context() const { return cache + scratch; }
  uint64_t total() const { return weights + cache + scratch; }
};
// `layers`: a pipeline stage's share (its layers' cache; logits only for the last stage).
memory_estimate memory_needed(const model_hparams& hp, uint64_t weight_bytes,
                              const context_params& p, layer_range layers = {});

// One token of a batch: its id, its sequence and position in that sequence, and whether its
// logits are wanted.
struct batch_token {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool logits = false;
};

class context {
 public:
  // Allocates the cache and scratch. Throws std::runtime_error if they do not fit in memory.
  context(const model& m, const context_params& p);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  // Runs the tokens through the model. Invalid input (token out of range, bad sequence id,
  // more tokens than free cells) is an error that leaves the context as it was.
  result<void> decode(std::span<const batch_token> batch) { return decode(batch, {}); }

  // As decode(), for a model loaded as a pipeline stage (engine/layer-range.h). `hidden` is the
  // residual stream entering the stage's first layer: batch.size() rows of n_embd F32, in batch
  // order (empty for the first stage, which embeds the tokens' ids). A stage that is not the
  // last computes no logits: each token's residual stream after the stage's last layer is then
  // in hidden_out(), in batch order, for the next stage, and the `logits` flags only travel on.
  // Split into stages that each see the same batches, a model computes exactly what it computes
  // whole (tests/pipeline_stages_test.cpp).
  result<void> decode(std::span<const batch_token> batch, std::span<const float> hidden);
  // The residual stream out of a stage's last decode(): batch.size() rows of n_embd F32 (empty
  // for the last stage).
  std::span<const float> hidden_out() const { return hidden_out_; }

  // Runs one token through the model, its logits included, and forgets it, so that what the
  // backends make on a tensor's first use (the CPU's packed weight layouts, engine/cpu/
  // packed-weights.h) is made now and not in the time to first token of the first request. For
  // a context that holds no tokens yet (an error otherwise); it holds none afterwards, and what
  // it computes from then on is exactly what a fresh context computes.
  result<void> warm_up();

  // Logits of the i-th token that asked for them in the last decode() (in batch order).
  const float* logits(int32_t i) const { return logits_.data() + size_t(i) * size_t(n_vocab_); }
  int32_t n_logits() const { return n_logits_; }
  int32_t n_vocab() const { return n_vocab_; }

  // Sets the observer of the forward pass's named intermediates (engine/eval-callback.h), or
  // none (nullptr, the default: nothing is downloaded). `cb` must outlive the decode() calls.
  void eval_callback_set(const eval_callback* cb) { fb_.eval = cb; }

  void seq_clear(int32_t seq) { kv_->seq_clear(seq); }
  void clear() { kv_->clear(); }
  // Forgets the tokens of `seq` at positions >= pos, keeping its prefix (a cached prompt).
  void seq_truncate(int32_t seq, int32_t pos) { kv_->seq_truncate(seq, pos); }
  // The position the next token of `seq` takes (0 for an empty sequence).
  int32_t seq_next_pos(int32_t seq) const { return kv_->seq_pos_max(seq) + 1; }
  // Gives the empty sequence `dst` copies of every cell of `src` (same positions, same keys and
  // values): `dst` then continues from `src`'s tokens without decoding them again, as n choices
  // of one prompt do (node/batch-engine.cpp). The rows go through the backend's own ops (get_rows
  // of the F16 cache into F32 scratch, kv_store back, exact both ways), so it works the same on
  // every backend, device memory included. Errors (ids out of range, `dst` not empty, too few
  // free cells) leave the context as it was.
  result<void> seq_copy(int32_t src, int32_t dst);

  int32_t n_ctx() const { return kv_->size(); }
  int32_t n_free() const { return kv_->n_free(); }
  int32_t n_seq_max() const { return params_.n_seq_max; }
  const hearth::model& model() const { return model_; }

 private:
  result<void> decode_chunk(std::span<const batch_token> chunk, const float* hidden,
                            float* hidden_out);

  const hearth::model& model_;
  context_params params_;
  int32_t n_vocab_ = 0;
  std::unique_ptr<kv_cache> kv_;
  activations act_;
  forward_batch fb_;
  std::vector<tensor*> owned_;
  std::vector<float> logits_;
  int32_t n_logits_ = 0;
  bool first_ = true, last_ = true;  // the model's range starts at layer 0 / ends at the last
  int32_t n_embd_ = 0;
  std::vector<float> hidden_out_;
  // Rows of act_.logits: n_batch, fewer where a batch's logits would pass the backend's largest
  // tensor (backend::max_alloc_bytes); a chunk then holds at most that many tokens wanting logits.
  int32_t logit_rows_ = 0;
  // Host staging of the per-token inputs (reused; no allocation per decode).
  std::vector<int32_t> ids_, pos_, seq_, cell_, rows_;
};

}  // namespace hearth
