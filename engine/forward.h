// What one forward pass works on: the micro-batch's inputs, the KV cache, the scratch
// activations (allocated once per context at the largest batch size) and where logits go.
#pragma once

#include <cstdint>

#include "engine/backend.h"
#include "engine/eval-callback.h"
#include "engine/kv-cache.h"

namespace hearth {

// Intermediate activations of the forward pass, each sized for n_batch tokens; a pass over
// fewer tokens uses the leading rows (tensor_rows). The names an observer sees them under are
// listed in engine/eval-callback.h.
struct activations {
  tensor inp;       // F32 [n_batch, n_embd]  residual stream
  tensor cur;       // F32 [n_batch, n_embd]  normed input of a block
  tensor q;         // F32 [n_batch, n_head * head_dim_k]
  tensor k;         // F32 [n_batch, n_head_kv * head_dim_k]
  tensor v;         // F32 [n_batch, n_head_kv * head_dim_v]
  tensor kqv;       // F32 [n_batch, n_head * head_dim_v]  attention output before wo
  tensor attn_out;  // F32 [n_batch, n_embd]
  tensor ffn_gate;  // F32 [n_batch, n_ff]
  tensor ffn_up;    // F32 [n_batch, n_ff]
  tensor ffn_out;   // F32 [n_batch, n_embd]
  // Mixture-of-experts models only (absent otherwise); k = n_expert_used.
  tensor moe_logits;   // F32 [n_batch, n_expert]  router logits
  tensor moe_ids;      // I32 [n_batch, k]  chosen experts
  tensor moe_weights;  // F32 [n_batch, k]  their weights
  tensor moe_gate;     // F32 [n_batch * k, n_ff_exp]
  tensor moe_up;       // F32 [n_batch * k, n_ff_exp]
  tensor moe_down;     // F32 [n_batch * k, n_embd]
  tensor out_sel;      // F32 [n_batch, n_embd]  rows whose logits are wanted
  tensor logits;       // F32 [n_batch, n_vocab]
};

struct forward_batch {
  int32_t n_tokens = 0;
  int32_t n_outputs = 0;  // rows of `logits` to fill
  tensor tok_ids;         // I32 [n_tokens]
  tensor tok_pos;         // I32 [n_tokens]
  tensor tok_seq;         // I32 [n_tokens]
  tensor tok_cell;        // I32 [n_tokens]  cache cell each token's K/V is stored in
  tensor out_rows;        // I32 [n_outputs] token indices whose logits are wanted
  kv_cache* kv = nullptr;
  activations* act = nullptr;
  const eval_callback* eval = nullptr;  // observer of the named intermediates, or none
};

}  // namespace hearth
