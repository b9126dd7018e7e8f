// Stages every decoder-only family runs the same way, so each file under engine/models/ says only
// what its family does differently: the batch's views, self-attention and the output head.
#pragma once

#include <cstdint>
#include <string>

#include "engine/forward.h"
#include "engine/model.h"

namespace hearth {

// The leading n_tokens rows of every activation and the batch inputs as vectors: what one pass
// over this micro-batch reads and writes.
struct batch_views {
  explicit batch_views(const forward_batch& fb);

  tensor ids, pos, seq, cells;  // I32 [n_tokens]
  tensor inp;                   // F32 [n_tokens, n_embd]  residual stream
  tensor cur;                   // F32 [n_tokens, n_embd]  normed input of a block
  tensor q, k, v;               // F32 [n_tokens, n_head(_kv) * head_dim]
  tensor kqv;                   // F32 [n_tokens, n_head * head_dim_v]
  tensor attn_out;              // F32 [n_tokens, n_embd]
  tensor gate, up;              // F32 [n_tokens, n_ff]
  tensor ffn_out;               // F32 [n_tokens, n_embd]
  // Mixture of experts (absent in dense models): k = n_expert_used rows per token.
  tensor moe_logits, moe_ids, moe_weights;  // [n_tokens, n_expert], [n_tokens, k] (I32, F32)
  tensor moe_gate, moe_up, moe_down;        // F32 [n_tokens * k, n_ff_exp | n_embd]
};

// A layer's attention parameters: heads, the query scale (hparams.query_scale or
// 1/sqrt(head_dim_k)), the score soft-cap, and hparams.n_swa as the window when `sliding`.
attention_params attention_params_of(const model_hparams& hp, bool sliding);

// Whether layer il has a sliding window (hparams.n_swa > 0, chosen by hparams.swa_pattern).
bool layer_slides(const model_hparams& hp, int32_t il);

// Layer il's rotary parameters: hparams.rope, with hparams.swa_freq_base (unscaled) on sliding
// layers when the family sets one.
rope_params rope_params_of(const model_hparams& hp, int32_t il);

// b.cur (the normed block input) -> b.attn_out: Q/K/V products with their biases, per-head
// RMSNorm of Q and K when the layer has attn_q_norm/attn_k_norm, rope, the K/V store into the
// cache, attention over the cache, and the output projection.
void self_attention(const model& m, const layer_weights& l, int32_t il, const forward_batch& fb,
                    const batch_views& b, const attention_params& ap, const rope_params& rope);

// b.cur (the normed block input) -> b.ffn_out through the layer's experts: router logits,
// moe_route (renormalised top-k), gate and up products of the chosen experts, SwiGLU, their
// down products, and the weighted sum.
void moe_feed_forward(const model& m, const layer_weights& l, int32_t il, const forward_batch& fb,
                      const batch_views& b);

// The rows of b.inp whose logits are wanted -> output_norm -> output matrix (-> the final
// soft-cap when hparams.final_softcap > 0) -> fb.act->logits.
void output_logits(const model& m, const forward_batch& fb, const batch_views& b);

// --- loading ------------------------------------------------------------------------------

// token_embd, output_norm and output (the embedding table when output.weight is absent: tied),
// as far as the loader's layer range needs them: token_embd for the first stage (and the last
// when tied), output_norm and output for the last.
void load_embeddings_and_output(model_loader& ld, const model_hparams& hp, model_weights& w);

// w.layers sized to hparams.n_layer; each layer of the loader's range loaded in order by
// load_layer(il, layer), the others left absent.
template <class LoadLayer>
void load_layers(model_loader& ld, const model_hparams& hp, model_weights& w,
                 const LoadLayer& load_layer) {
  w.layers.resize(size_t(hp.n_layer));
  for (int32_t il = ld.layers().first; il < ld.layers().end; ++il) {
    load_layer(il, w.layers[size_t(il)]);
  }
}

// Gemma 2's and Gemma 3's layer: load_attention (and load_qk_norm when `qk_norm`: Gemma 3),
// blk.<il>.post_attention_norm, load_ffn and post_ffw_norm.
void load_gemma_layer(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l,
                      bool qk_norm);

// blk.<il>.attn_norm, attn_q/k/v (+ optional biases) and attn_output.
void load_attention(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l);

// blk.<il>.ffn_norm, ffn_gate, ffn_up and ffn_down.
void load_ffn(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l);

// blk.<il>.attn_q_norm and attn_k_norm: per-head RMSNorm weights [head_dim_k].
void load_qk_norm(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l);

// blk.<il>.ffn_norm, the router ffn_gate_inp and the experts ffn_{gate,up,down}_exps. A file
// that says it has experts must have them: the error names the missing tensor.
void load_moe_ffn(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l);

// "blk.<il>." — the prefix of a layer's tensor names.
std::string layer_prefix(int32_t il);

// --- the decoder block ----------------------------------------------------------------------

// How a family's blocks differ from Llama's.
struct block_style {
  bool scale_embeddings = false;  // embeddings × sqrt(n_embd) (Gemma)
  bool gelu = false;              // GELU-gated feed-forward instead of SwiGLU (Gemma)
};

// The embedding lookup (the first stage; another reads the residual stream its context put in
// fb.act->inp), then per layer of the model's range: RMSNorm, self-attention, [post-attention
// RMSNorm], residual add, RMSNorm, gated feed-forward or the experts (when the layer has a router),
// [post-feed-forward RMSNorm], residual add (the bracketed norms when the layer has those
// weights: Gemma 2 and 3), then the output head (the last stage; another leaves the residual
// stream in fb.act->inp). Which layers slide, and their rope, come from
// the hyperparameters (swa_pattern, swa_freq_base).
void forward_decoder(const model& m, forward_batch& fb, const block_style& style);

}  // namespace hearth
