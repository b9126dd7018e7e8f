// Observing the forward pass: every intermediate it computes has a name (llama.cpp's, as its
// eval callback sees them: `cb(cur, "attn_norm", il)`), so one layer's values can be dumped and
// diffed against the reference (../shared/STYLE.md 5). The forward pass offers each intermediate
// right after the op that produces it; an observer says which it wants and receives those with
// their values copied to the host, whatever the backend. Without an observer nothing is
// downloaded and the pass does not wait: the cost is one pointer test per named op.
//
// Names, per layer il (in the order they are computed):
//   attn_norm, [Qcur_normed, Kcur_normed], Qcur, Kcur (after rope), Vcur, kqv_out (attention
//   before the output projection), attn_out, [attn_post_norm], ffn_inp, ffn_norm, then either
//   ffn_gate, ffn_up, ffn_swiglu | ffn_geglu, ffn_out or, in mixture-of-experts layers,
//   ffn_moe_logits, ffn_moe_weights_norm, ffn_moe_gate, ffn_moe_up, ffn_moe_swiglu, ffn_moe_down
//   (rows: each token's k chosen experts), ffn_moe_out; then [ffn_post_norm], l_out
// and outside the blocks (layer -1): inp_embd, [inp_scaled], result_norm, result_output (the
// logits, after the final soft-cap where a family has one). Bracketed ones exist only in the
// families that compute them (Gemma's embedding scale, Gemma 2 and 3's post-norms, Qwen3 and
// Gemma 3's per-head norms of q and k).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "engine/backend.h"

namespace hearth {

// One named intermediate of one forward pass, on the host.
struct intermediate {
  std::string_view name;
  int32_t layer = -1;  // the block that computed it; -1 outside the blocks
  // 2: values.ne = {width, n_rows}; 3: values.ne = {head_dim, n_head, n_rows} (Qcur, Kcur, Vcur,
  // as the reference lays them out). Rows are the pass's tokens in batch order, except for
  // result_norm and result_output, whose rows are the tokens that asked for logits.
  int32_t n_dims = 2;
  tensor values;  // F32 in host memory, valid during the call only
};

struct eval_callback {
  // Which intermediates to download and observe (absent: every one).
  std::function<bool(std::string_view name, int32_t layer)> wants;
  // Called once per wanted intermediate and forward pass, in the order they are computed.
  std::function<void(const intermediate&)> observe;
};

// Downloads `t` (F32 [n_rows, width] in `be`'s memory) and passes it to cb.observe when cb.wants
// it; `head_dim` > 0 reports it per head. The forward pass calls eval_callback_offer.
void eval_callback_run(const eval_callback& cb, backend& be, const tensor& t, std::string_view name,
                       int32_t layer, int32_t head_dim);

// cb(t, name, layer) of the forward pass: a no-op without an observer.
inline void eval_callback_offer(const eval_callback* cb, backend& be, const tensor& t,
                                std::string_view name, int32_t layer, int32_t head_dim = 0) {
  if (cb) eval_callback_run(*cb, be, t, name, layer, head_dim);
}

}  // namespace hearth
