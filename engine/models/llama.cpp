// The llama architecture as GGUF stores it: Llama 1/2/3, TinyLlama, Mistral, SmolLM.
// Pre-norm blocks with RMSNorm, rotary embeddings on adjacent pairs (the converter permutes Q and
// K rows for that), grouped-query attention, a SwiGLU feed-forward, tied or separate output.
#include <cmath>
#include <string>

#include "engine/architecture.h"
#include "engine/forward.h"

namespace hearth {
namespace {

class llama_architecture final : public architecture {
 public:
  std::string_view name() const override { return "llama"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = false;
    const int64_t q_width = int64_t(hp.n_head) * hp.head_dim_k;
    const int64_t k_width = int64_t(hp.n_head_kv) * hp.head_dim_k;
    const int64_t v_width = int64_t(hp.n_head_kv) * hp.head_dim_v;
    const int64_t kqv_width = int64_t(hp.n_head) * hp.head_dim_v;

    w.tok_embd = ld.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
    w.output_norm = ld.vector("output_norm.weight", hp.n_embd);
    w.output = ld.matrix_optional("output.weight", hp.n_embd, hp.n_vocab);
    if (!w.output.present()) w.output = w.tok_embd;  // tied embeddings
    w.rope_freqs = ld.vector_optional("rope_freqs.weight", hp.rope.n_dims / 2);

    w.layers.resize(size_t(hp.n_layer));
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      layer_weights& l = w.layers[size_t(il)];
      l.attn_norm = ld.vector(p + "attn_norm.weight", hp.n_embd);
      l.wq = ld.matrix(p + "attn_q.weight", hp.n_embd, q_width);
      l.wk = ld.matrix(p + "attn_k.weight", hp.n_embd, k_width);
      l.wv = ld.matrix(p + "attn_v.weight", hp.n_embd, v_width);
      l.wo = ld.matrix(p + "attn_output.weight", kqv_width, hp.n_embd);
      // Some llama-architecture conversions carry attention biases.
      l.bq = ld.vector_optional(p + "attn_q.bias", q_width);
      l.bk = ld.vector_optional(p + "attn_k.bias", k_width);
      l.bv = ld.vector_optional(p + "attn_v.bias", v_width);
      l.ffn_norm = ld.vector(p + "ffn_norm.weight", hp.n_embd);
      l.ffn_gate = ld.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
      l.ffn_up = ld.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff);
      l.ffn_down = ld.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    }
  }

  void forward(const model& m, forward_batch& fb) const override {
    const model_hparams& hp = m.hparams();
    const model_weights& w = m.weights();
    backend& be = m.backend();
    activations& a = *fb.act;
    const int64_t n = fb.n_tokens;

    auto rows = [n](const tensor& t) { return tensor_rows(t, n); };
    auto vec = [](const tensor& t, int64_t len) {
      tensor v = t;
      v.ne[0] = len;
      return v;
    };
    const tensor ids = vec(fb.tok_ids, n), pos = vec(fb.tok_pos, n), seq = vec(fb.tok_seq, n);
    const tensor cells = vec(fb.tok_cell, n);
    const tensor inp = rows(a.inp), cur = rows(a.cur), q = rows(a.q), k = rows(a.k), v = rows(a.v);
    const tensor kqv = rows(a.kqv), attn_out = rows(a.attn_out);
    const tensor gate = rows(a.ffn_gate), up = rows(a.ffn_up), ffn_out = rows(a.ffn_out);

    attention_params ap;
    ap.n_head = hp.n_head;
    ap.n_head_kv = hp.n_head_kv;
    ap.head_dim_k = hp.head_dim_k;
    ap.head_dim_v = hp.head_dim_v;
    ap.scale = 1.0f / std::sqrt(float(hp.head_dim_k));
    const tensor* freq_factors = w.rope_freqs.present() ? &w.rope_freqs : nullptr;

    be.get_rows(w.tok_embd, ids, inp);  // inp_embd
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      const layer_weights& l = w.layers[size_t(il)];
      be.rms_norm(inp, l.attn_norm, hp.norm_eps, cur);             // attn_norm
      be.mul_mat(l.wq, cur, l.bq.present() ? &l.bq : nullptr, q);  // Qcur
      be.mul_mat(l.wk, cur, l.bk.present() ? &l.bk : nullptr, k);  // Kcur
      be.mul_mat(l.wv, cur, l.bv.present() ? &l.bv : nullptr, v);  // Vcur
      be.rope(q, hp.n_head, hp.head_dim_k, pos, hp.rope, freq_factors);
      be.rope(k, hp.n_head_kv, hp.head_dim_k, pos, hp.rope, freq_factors);
      be.kv_store(k, cells, fb.kv->k(il));
      be.kv_store(v, cells, fb.kv->v(il));
      be.attention(q, fb.kv->k(il), fb.kv->v(il), seq, pos, fb.kv->cell_seq(), fb.kv->cell_pos(),
                   fb.kv->extent(), ap, kqv);          // kqv_out
      be.mul_mat(l.wo, kqv, nullptr, attn_out);        // attn_out
      be.add(attn_out, inp, inp);                      // ffn_inp
      be.rms_norm(inp, l.ffn_norm, hp.norm_eps, cur);  // ffn_norm
      be.mul_mat(l.ffn_gate, cur, nullptr, gate);
      be.mul_mat(l.ffn_up, cur, nullptr, up);
      be.swiglu(gate, up, gate);                       // ffn_silu * ffn_up
      be.mul_mat(l.ffn_down, gate, nullptr, ffn_out);  // ffn_out
      be.add(ffn_out, inp, inp);                       // l_out
    }
    if (fb.n_outputs == 0) return;
    // Only the rows whose logits are wanted go through the final norm and the output matrix.
    const tensor sel = tensor_rows(a.out_sel, fb.n_outputs);
    be.get_rows(inp, vec(fb.out_rows, fb.n_outputs), sel);
    be.rms_norm(sel, w.output_norm, hp.norm_eps, sel);                        // result_norm
    be.mul_mat(w.output, sel, nullptr, tensor_rows(a.logits, fb.n_outputs));  // result_output
  }
};

}  // namespace

std::unique_ptr<architecture> make_llama_architecture() {
  return std::make_unique<llama_architecture>();
}

}  // namespace hearth
