#include "engine/context.h"

#include <algorithm>
#include <stdexcept>

#include "engine/architecture.h"
#include "engine/system-info.h"

namespace hearth {
namespace {

// a * b, saturating: hyperparameters come from untrusted metadata, an absurd product must read as
// "does not fit", never wrap around to a small number.
uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? UINT64_MAX : out;
}

uint64_t add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}

}  // namespace

context_params context_params_resolved(const model_hparams& hp, const context_params& p) {
  context_params out = p;
  if (out.n_ctx <= 0) out.n_ctx = std::min(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096, 4096);
  out.n_batch = std::clamp(p.n_batch, 1, out.n_ctx);
  return out;
}

memory_estimate memory_needed(const model_hparams& hp, uint64_t weight_bytes,
                              const context_params& p, layer_range layers) {
  layers = layers.resolved(hp.n_layer);
  const context_params r = context_params_resolved(hp, p);
  const uint64_t n_ctx = uint64_t(r.n_ctx);
  const uint64_t n_batch = uint64_t(r.n_batch);
  const uint64_t n_head = uint64_t(hp.n_head), n_head_kv = uint64_t(hp.n_head_kv);
  const uint64_t head_k = uint64_t(hp.head_dim_k), head_v = uint64_t(hp.head_dim_v);
  memory_estimate e;
  e.weights = weight_bytes;
  // kv_cache: F16 K and V rows per layer, and each cell's sequence and position (I32).
  e.cache = mul(n_ctx, add(kv_cache::bytes_per_cell(hp, layers), 2 * 4));
  // The F32 activations below, as the constructor allocates them: inp, cur, attn_out, ffn_out,
  // out_sel (n_embd); q, k, v, kqv; ffn_gate, ffn_up (n_ff) or the experts'; logits (n_vocab,
  // the last stage only).
  // A mixture-of-experts model has, instead of ffn_gate and ffn_up, the router's logits, ids and
  // weights and each of its k slots' gate, up (n_ff_exp) and down (n_embd) rows.
  const uint64_t k = uint64_t(hp.n_expert_used);
  const uint64_t ffn = hp.n_expert > 0 ? uint64_t(hp.n_expert) + 2 * k +
                                             k * (2 * uint64_t(hp.n_ff_exp) + uint64_t(hp.n_embd))
                                       : 2 * uint64_t(hp.n_ff);
  const uint64_t per_token = 5 * uint64_t(hp.n_embd) + n_head * head_k + n_head_kv * head_k +
                             n_head_kv * head_v + n_head * head_v + ffn +
                             (layers.has_output(hp.n_layer) ? uint64_t(hp.n_vocab) : 0);
  // Counted twice: a backend's own scratch (quantized activations, attention rows) is allocated
  // outside alloc() and not known here; this is its allowance. Plus the five I32 per-token inputs.
  e.scratch = add(mul(mul(n_batch, per_token), 4 * 2), n_batch * 5 * 4);
  return e;
}

context::context(const hearth::model& m, const context_params& p) : model_(m), params_(p) {
  const auto& hp = m.hparams();
  params_ = context_params_resolved(hp, p);
  if (params_.n_seq_max < 1) throw std::runtime_error("n_seq_max must be at least 1");
  n_vocab_ = hp.n_vocab;
  n_embd_ = hp.n_embd;
  first_ = m.layers().has_input();
  last_ = m.layers().has_output(hp.n_layer);

  const uint64_t need = memory_needed(hp, m.weight_bytes(), params_, m.layers()).context();
  const system_info sys = system_info_read();
  if (sys.mem_available > 0 && need > sys.mem_available) {
    throw std::runtime_error("a context of " + std::to_string(params_.n_ctx) + " tokens needs " +
                             format_bytes(need) + " but only " + format_bytes(sys.mem_available) +
                             " of memory is available; use a smaller --ctx");
  }

  backend& be = m.backend();
  kv_ = std::make_unique<kv_cache>(be, hp, params_.n_ctx, m.layers());
  const int64_t nb = params_.n_batch;
  const int64_t q_width = int64_t(hp.n_head) * hp.head_dim_k;
  const int64_t k_width = int64_t(hp.n_head_kv) * hp.head_dim_k;
  const int64_t v_width = int64_t(hp.n_head_kv) * hp.head_dim_v;
  const int64_t kqv_width = int64_t(hp.n_head) * hp.head_dim_v;
  auto alloc = [&](tensor& t, tensor_type type, int64_t ne0, const char* name) {
    t = be.alloc(type, ne0, nb, name);
    owned_.push_back(&t);
  };
  alloc(act_.inp, tensor_type::f32, hp.n_embd, "inp");
  alloc(act_.cur, tensor_type::f32, hp.n_embd, "cur");
  alloc(act_.q, tensor_type::f32, q_width, "q");
  alloc(act_.k, tensor_type::f32, k_width, "k");
  alloc(act_.v, tensor_type::f32, v_width, "v");
  alloc(act_.kqv, tensor_type::f32, kqv_width, "kqv");
  alloc(act_.attn_out, tensor_type::f32, hp.n_embd, "attn_out");
  if (hp.n_expert > 0) {
    const int64_t k = hp.n_expert_used;
    auto alloc_rows = [&](tensor& t, tensor_type type, int64_t ne0, int64_t rows,
                          const char* name) {
      t = be.alloc(type, ne0, rows, name);
      owned_.push_back(&t);
    };
    alloc_rows(act_.moe_logits, tensor_type::f32, hp.n_expert, nb, "moe_logits");
    alloc_rows(act_.moe_ids, tensor_type::i32, k, nb, "moe_ids");
    alloc_rows(act_.moe_weights, tensor_type::f32, k, nb, "moe_weights");
    alloc_rows(act_.moe_gate, tensor_type::f32, hp.n_ff_exp, nb * k, "moe_gate");
    alloc_rows(act_.moe_up, tensor_type::f32, hp.n_ff_exp, nb * k, "moe_up");
    alloc_rows(act_.moe_down, tensor_type::f32, hp.n_embd, nb * k, "moe_down");
  } else {
    alloc(act_.ffn_gate, tensor_type::f32, hp.n_ff, "ffn_gate");
    alloc(act_.ffn_up, tensor_type::f32, hp.n_ff, "ffn_up");
  }
  alloc(act_.ffn_out, tensor_type::f32, hp.n_embd, "ffn_out");
  alloc(act_.out_sel, tensor_type::f32, hp.n_embd, "out_sel");
  // Every stage splits a batch at the same tokens (logit_rows_ is counted the same way), so
  // each sees the chunks the whole model would; only the last has logits.
  logit_rows_ = int32_t(
      std::clamp<uint64_t>(be.max_alloc_bytes() / (uint64_t(hp.n_vocab) * 4), 1, uint64_t(nb)));
  if (last_) {
    act_.logits = be.alloc(tensor_type::f32, hp.n_vocab, logit_rows_, "logits");
    owned_.push_back(&act_.logits);
  }
  // Per-token inputs are I32 vectors: one row of nb values.
  auto alloc_vec = [&](tensor& t, const char* name) {
    t = be.alloc(tensor_type::i32, nb, 1, name);
    owned_.push_back(&t);
  };
  alloc_vec(fb_.tok_ids, "tok_ids");
  alloc_vec(fb_.tok_pos, "tok_pos");
  alloc_vec(fb_.tok_seq, "tok_seq");
  alloc_vec(fb_.tok_cell, "tok_cell");
  alloc_vec(fb_.out_rows, "out_rows");
  fb_.kv = kv_.get();
  fb_.act = &act_;
  for (auto* v : {&ids_, &pos_, &seq_, &cell_, &rows_}) v->resize(size_t(nb));
}

context::~context() {
  for (tensor* t : owned_) model_.backend().free(*t);
}

result<void> context::decode(std::span<const batch_token> batch, std::span<const float> hidden) {
  if (batch.empty()) return error{"decode: empty batch"};
  const size_t hidden_want = first_ ? 0 : batch.size() * size_t(n_embd_);
  if (hidden.size() != hidden_want) {
    return error{"decode: " + std::to_string(hidden.size()) + " hidden-state values for " +
                 std::to_string(batch.size()) + " tokens; this stage wants " +
                 std::to_string(hidden_want) +
                 (first_ ? " (it embeds the tokens itself)" : " (n_embd per token)")};
  }
  int32_t n_wanted = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const batch_token& t = batch[i];
    if (t.token < 0 || t.token >= n_vocab_) {
      return error{"token " + std::to_string(t.token) + " at batch index " + std::to_string(i) +
                   " is outside the vocabulary [0, " + std::to_string(n_vocab_) + ")"};
    }
    if (t.seq < 0 || t.seq >= params_.n_seq_max) {
      return error{"sequence id " + std::to_string(t.seq) + " is outside [0, " +
                   std::to_string(params_.n_seq_max) + ")"};
    }
    if (t.pos < 0)
      return error{"negative position " + std::to_string(t.pos) + " at batch index " +
                   std::to_string(i)};
    n_wanted += t.logits ? 1 : 0;
  }
  if (int32_t(batch.size()) > kv_->n_free()) {
    return error{"context full: " + std::to_string(batch.size()) +
                 " tokens need cache cells but only " + std::to_string(kv_->n_free()) + " of " +
                 std::to_string(kv_->size()) + " are free (a longer context needs a larger --ctx)"};
  }

  logits_.resize(last_ ? size_t(n_wanted) * size_t(n_vocab_) : 0);
  n_logits_ = 0;
  hidden_out_.resize(last_ ? 0 : batch.size() * size_t(n_embd_));
  // Chunks of up to n_batch tokens, of which at most logit_rows_ want logits.
  for (size_t begin = 0, end = 0; begin < batch.size(); begin = end) {
    int32_t wanted = 0;
    for (end = begin; end < batch.size() && end - begin < size_t(params_.n_batch); ++end) {
      if (!batch[end].logits) continue;
      if (wanted == logit_rows_) break;
      ++wanted;
    }
    const size_t row = begin * size_t(n_embd_);
    auto r = decode_chunk(batch.subspan(begin, end - begin), first_ ? nullptr : hidden.data() + row,
                          last_ ? nullptr : hidden_out_.data() + row);
    if (!r) return r;
  }
  return {};
}

result<void> context::warm_up() {
  if (kv_->n_free() != kv_->size()) {
    return error{"warm_up: the context already holds " +
                 std::to_string(kv_->size() - kv_->n_free()) + " tokens"};
  }
  const batch_token t{0, 0, 0, true};  // token 0 is in every vocabulary
  const std::vector<float> zeros(first_ ? 0 : size_t(n_embd_), 0.0f);
  auto r = decode({&t, 1}, zeros);
  kv_->clear();
  n_logits_ = 0;
  return r;
}

result<void> context::seq_copy(int32_t src, int32_t dst) {
  for (int32_t s : {src, dst}) {
    if (s < 0 || s >= params_.n_seq_max) {
      return error{"sequence id " + std::to_string(s) + " is outside [0, " +
                   std::to_string(params_.n_seq_max) + ")"};
    }
  }
  if (src == dst) return error{"seq_copy: a sequence cannot be copied onto itself"};
  if (kv_->seq_pos_max(dst) >= 0) {
    return error{"seq_copy: sequence " + std::to_string(dst) + " is not empty"};
  }
  const std::vector<int32_t> from = kv_->seq_cells(src);
  if (int32_t(from.size()) > kv_->n_free()) {
    return error{"context full: copying sequence " + std::to_string(src) + " needs " +
                 std::to_string(from.size()) + " cells but only " + std::to_string(kv_->n_free()) +
                 " are free"};
  }
  backend& be = model_.backend();
  // In chunks of n_batch rows: the F32 scratch rows are act_.k and act_.v, the source cells go in
  // tok_ids (get_rows' ids) and the new cells in tok_cell (kv_store's cells).
  for (size_t begin = 0; begin < from.size(); begin += size_t(params_.n_batch)) {
    const int32_t n = int32_t(std::min(from.size() - begin, size_t(params_.n_batch)));
    for (int32_t i = 0; i < n; ++i) {
      ids_[size_t(i)] = from[begin + size_t(i)];
      pos_[size_t(i)] = kv_->cell_pos(ids_[size_t(i)]);
      seq_[size_t(i)] = dst;
    }
    if (!kv_->place({seq_.data(), size_t(n)}, {pos_.data(), size_t(n)},
                    {cell_.data(), size_t(n)})) {
      return error{"context full"};  // checked above: not reached
    }
    kv_->upload_cells();
    be.upload(fb_.tok_ids, ids_.data(), size_t(n) * 4);
    be.upload(fb_.tok_cell, cell_.data(), size_t(n) * 4);
    tensor ids = fb_.tok_ids, cells = fb_.tok_cell;
    ids.ne[0] = cells.ne[0] = n;
    const tensor k = tensor_rows(act_.k, n), v = tensor_rows(act_.v, n);
    for (int32_t l = kv_->layers().first; l < kv_->layers().end; ++l) {
      be.get_rows(kv_->k(l), ids, k);
      be.kv_store(k, cells, kv_->k(l));
      be.get_rows(kv_->v(l), ids, v);
      be.kv_store(v, cells, kv_->v(l));
    }
  }
  be.synchronize();
  return {};
}

result<void> context::decode_chunk(std::span<const batch_token> chunk, const float* hidden,
                                   float* hidden_out) {
  const int32_t n = int32_t(chunk.size());
  int32_t n_out = 0;
  for (int32_t i = 0; i < n; ++i) {
    ids_[size_t(i)] = chunk[size_t(i)].token;
    pos_[size_t(i)] = chunk[size_t(i)].pos;
    seq_[size_t(i)] = chunk[size_t(i)].seq;
    if (chunk[size_t(i)].logits) rows_[size_t(n_out++)] = i;
  }
  if (!kv_->place({seq_.data(), size_t(n)}, {pos_.data(), size_t(n)}, {cell_.data(), size_t(n)})) {
    return error{"context full"};  // decode() checked the free count: not reached
  }
  kv_->upload_cells();

  backend& be = model_.backend();
  be.upload(fb_.tok_ids, ids_.data(), size_t(n) * 4);
  be.upload(fb_.tok_pos, pos_.data(), size_t(n) * 4);
  be.upload(fb_.tok_seq, seq_.data(), size_t(n) * 4);
  be.upload(fb_.tok_cell, cell_.data(), size_t(n) * 4);
  be.upload(fb_.out_rows, rows_.data(), size_t(n_out) * 4);
  if (hidden) be.upload(act_.inp, hidden, size_t(n) * size_t(n_embd_) * 4);
  fb_.n_tokens = n;
  fb_.n_outputs = last_ ? n_out : 0;

  model_.arch().forward(model_, fb_);

  if (hidden_out) {
    be.download(act_.inp, hidden_out, size_t(n) * size_t(n_embd_) * 4);
  } else if (n_out > 0) {
    be.download(act_.logits, logits_.data() + size_t(n_logits_) * size_t(n_vocab_),
                size_t(n_out) * size_t(n_vocab_) * 4);
    n_logits_ += n_out;
  } else {
    be.synchronize();
  }
  return {};
}

}  // namespace hearth
