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
  result<void> decode(std::span<const batch_token> batch);

  // Logits of the i-th token that asked for them in the last decode() (in batch order).
  const float* logits(int32_t i) const { return logits_.data() + size_t(i) * size_t(n_vocab_); }
  int32_t n_logits() const { return n_logits_; }
  int32_t n_vocab() const { return n_vocab_; }

  // Sets the observer of the forward pass's named intermediates (engine/eval-callback.h), or
  // none (nullptr, the default: nothing is downloaded). `cb` must outlive the decode() calls.
  void eval_callback_set(const eval_callback* cb) { fb_.eval = cb; }

  void seq_clear(int32_t seq) { kv_->seq_clear(seq); }
  void clear() { kv_->clear(); }
  // The position the next token of `seq` takes (0 for an empty sequence).
  int32_t seq_next_pos(int32_t seq) const { return kv_->seq_pos_max(seq) + 1; }

  int32_t n_ctx() const { return kv_->size(); }
  int32_t n_free() const { return kv_->n_free(); }
  int32_t n_seq_max() const { return params_.n_seq_max; }
  const hearth::model& model() const { return model_; }

  // Bytes a context with these parameters allocates (cache + scratch), for memory planning.
  static uint64_t memory_needed(const hearth::model& m, const context_params& p);

 private:
  result<void> decode_chunk(std::span<const batch_token> chunk);

  const hearth::model& model_;
  context_params params_;
  int32_t n_vocab_ = 0;
  std::unique_ptr<kv_cache> kv_;
  activations act_;
  forward_batch fb_;
  std::vector<tensor*> owned_;
  std::vector<float> logits_;
  int32_t n_logits_ = 0;
  // Host staging of the per-token inputs (reused; no allocation per decode).
  std::vector<int32_t> ids_, pos_, seq_, cell_, rows_;
};

}  // namespace hearth
