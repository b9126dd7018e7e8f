#include "engine/models/transformer.h"

#include <cmath>

namespace hearth {
namespace {

tensor leading(const tensor& t, int64_t len) {
  tensor v = t;
  v.ne[0] = len;
  return v;
}

// The reference's cb(cur, name, il): offers an intermediate to the observer, if one is set.
void name_intermediate(const forward_batch& fb, backend& be, const tensor& t, std::string_view name,
                       int32_t il, int32_t head_dim = 0) {
  eval_callback_offer(fb.eval, be, t, name, il, head_dim);
}

}  // namespace

batch_views::batch_views(const forward_batch& fb) {
  const int64_t n = fb.n_tokens;
  const activations& a = *fb.act;
  ids = leading(fb.tok_ids, n);
  pos = leading(fb.tok_pos, n);
  seq = leading(fb.tok_seq, n);
  cells = leading(fb.tok_cell, n);
  inp = tensor_rows(a.inp, n);
  cur = tensor_rows(a.cur, n);
  q = tensor_rows(a.q, n);
  k = tensor_rows(a.k, n);
  v = tensor_rows(a.v, n);
  kqv = tensor_rows(a.kqv, n);
  attn_out = tensor_rows(a.attn_out, n);
  gate = tensor_rows(a.ffn_gate, n);
  up = tensor_rows(a.ffn_up, n);
  ffn_out = tensor_rows(a.ffn_out, n);
  const int64_t slots = a.moe_ids.ne[0];
  moe_logits = tensor_rows(a.moe_logits, n);
  moe_ids = tensor_rows(a.moe_ids, n);
  moe_weights = tensor_rows(a.moe_weights, n);
  moe_gate = tensor_rows(a.moe_gate, n * slots);
  moe_up = tensor_rows(a.moe_up, n * slots);
  moe_down = tensor_rows(a.moe_down, n * slots);
}

attention_params attention_params_of(const model_hparams& hp, bool sliding) {
  attention_params ap;
  ap.n_head = hp.n_head;
  ap.n_head_kv = hp.n_head_kv;
  ap.head_dim_k = hp.head_dim_k;
  ap.head_dim_v = hp.head_dim_v;
  ap.scale = hp.query_scale > 0 ? hp.query_scale : 1.0f / std::sqrt(float(hp.head_dim_k));
  ap.softcap = hp.attn_softcap;
  ap.window = sliding ? hp.n_swa : 0;
  return ap;
}

bool layer_slides(const model_hparams& hp, int32_t il) {
  if (hp.n_swa <= 0) return false;
  return hp.swa_pattern <= 0 || il % hp.swa_pattern < hp.swa_pattern - 1;
}

rope_params rope_params_of(const model_hparams& hp, int32_t il) {
  rope_params r = hp.rope;
  if (hp.swa_freq_base > 0 && layer_slides(hp, il)) {
    r.freq_base = hp.swa_freq_base;
    r.freq_scale = 1.0f;
    r.ext_factor = 0.0f;  // the local layers rotate unscaled
    r.attn_factor = 1.0f;
  }
  return r;
}

namespace {

// Per-head RMSNorm of q or k in place: the rows of `x` seen as n_tok * n_head rows of head_dim.
void head_norm(backend& be, const tensor& x, const tensor& weight, int32_t head_dim, float eps) {
  tensor heads = x;
  heads.ne[1] = x.ne[0] / head_dim * x.ne[1];
  heads.ne[0] = head_dim;
  be.rms_norm(heads, weight, eps, heads);
}

}  // namespace

void self_attention(const model& m, const layer_weights& l, int32_t il, const forward_batch& fb,
                    const batch_views& b, const attention_params& ap, const rope_params& rope) {
  const model_hparams& hp = m.hparams();
  const tensor* freq_factors = m.weights().rope_freqs.present() ? &m.weights().rope_freqs : nullptr;
  backend& be = m.backend();
  kv_cache& kv = *fb.kv;
  const backend::product qkv[] = {{&l.wq, l.bq.present() ? &l.bq : nullptr, &b.q},
                                  {&l.wk, l.bk.present() ? &l.bk : nullptr, &b.k},
                                  {&l.wv, l.bv.present() ? &l.bv : nullptr, &b.v}};
  be.mul_mats(b.cur, qkv);
  if (l.attn_q_norm.present()) {
    head_norm(be, b.q, l.attn_q_norm, hp.head_dim_k, hp.norm_eps);
    name_intermediate(fb, be, b.q, "Qcur_normed", il, hp.head_dim_k);
    head_norm(be, b.k, l.attn_k_norm, hp.head_dim_k, hp.norm_eps);
    name_intermediate(fb, be, b.k, "Kcur_normed", il, hp.head_dim_k);
  }
  be.rope(b.q, hp.n_head, hp.head_dim_k, b.pos, rope, freq_factors);
  name_intermediate(fb, be, b.q, "Qcur", il, hp.head_dim_k);
  be.rope(b.k, hp.n_head_kv, hp.head_dim_k, b.pos, rope, freq_factors);
  name_intermediate(fb, be, b.k, "Kcur", il, hp.head_dim_k);
  name_intermediate(fb, be, b.v, "Vcur", il, hp.head_dim_v);
  be.kv_store(b.k, b.cells, kv.k(il));
  be.kv_store(b.v, b.cells, kv.v(il));
  be.attention(b.q, kv.k(il), kv.v(il), b.seq, b.pos, kv.cell_seq(), kv.cell_pos(), kv.extent(), ap,
               b.kqv);
  name_intermediate(fb, be, b.kqv, "kqv_out", il);
  be.mul_mat(l.wo, b.kqv, nullptr, b.attn_out);
  name_intermediate(fb, be, b.attn_out, "attn_out", il);
}

void moe_feed_forward(const model& m, const layer_weights& l, int32_t il, const forward_batch& fb,
                      const batch_views& b) {
  backend& be = m.backend();
  be.mul_mat(l.ffn_gate_inp, b.cur, nullptr, b.moe_logits);
  name_intermediate(fb, be, b.moe_logits, "ffn_moe_logits", il);
  // Mixtral and Qwen3-MoE both renormalise the chosen experts' probabilities.
  be.moe_route(b.moe_logits, true, b.moe_ids, b.moe_weights);
  name_intermediate(fb, be, b.moe_weights, "ffn_moe_weights_norm", il);
  be.mul_mat_id(l.ffn_gate_exps, b.cur, b.moe_ids, b.moe_gate);
  name_intermediate(fb, be, b.moe_gate, "ffn_moe_gate", il);
  be.mul_mat_id(l.ffn_up_exps, b.cur, b.moe_ids, b.moe_up);
  name_intermediate(fb, be, b.moe_up, "ffn_moe_up", il);
  be.swiglu(b.moe_gate, b.moe_up, b.moe_gate);
  name_intermediate(fb, be, b.moe_gate, "ffn_moe_swiglu", il);
  be.mul_mat_id(l.ffn_down_exps, b.moe_gate, b.moe_ids, b.moe_down);
  name_intermediate(fb, be, b.moe_down, "ffn_moe_down", il);
  be.moe_combine(b.moe_down, b.moe_weights, b.ffn_out);
  name_intermediate(fb, be, b.ffn_out, "ffn_moe_out", il);
}

void output_logits(const model& m, const forward_batch& fb, const batch_views& b) {
  if (fb.n_outputs == 0) return;
  const model_hparams& hp = m.hparams();
  const model_weights& w = m.weights();
  backend& be = m.backend();
  // Only the rows whose logits are wanted go through the final norm and the output matrix.
  const tensor sel = tensor_rows(fb.act->out_sel, fb.n_outputs);
  const tensor logits = tensor_rows(fb.act->logits, fb.n_outputs);
  be.get_rows(b.inp, leading(fb.out_rows, fb.n_outputs), sel);
  be.rms_norm(sel, w.output_norm, hp.norm_eps, sel);
  name_intermediate(fb, be, sel, "result_norm", -1);
  be.mul_mat(w.output, sel, nullptr, logits);
  if (hp.final_softcap > 0) be.softcap(logits, hp.final_softcap, logits);
  name_intermediate(fb, be, logits, "result_output", -1);
}

std::string layer_prefix(int32_t il) {
  return "blk." + std::to_string(il) + ".";
}

void load_embeddings_and_output(model_loader& ld, const model_hparams& hp, model_weights& w) {
  const bool first = ld.layers().has_input(), last = ld.layers().has_output(hp.n_layer);
  if (last) {
    w.output_norm = ld.vector("output_norm.weight", hp.n_embd);
    w.output = ld.matrix_optional("output.weight", hp.n_embd, hp.n_vocab);
  }
  const bool tied = last && !w.output.present();
  if (first || tied) w.tok_embd = ld.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  if (tied) w.output = w.tok_embd;
}

void load_attention(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l) {
  const std::string p = layer_prefix(il);
  const int64_t q_width = int64_t(hp.n_head) * hp.head_dim_k;
  const int64_t k_width = int64_t(hp.n_head_kv) * hp.head_dim_k;
  const int64_t v_width = int64_t(hp.n_head_kv) * hp.head_dim_v;
  l.attn_norm = ld.vector(p + "attn_norm.weight", hp.n_embd);
  l.wq = ld.matrix(p + "attn_q.weight", hp.n_embd, q_width);
  l.wk = ld.matrix(p + "attn_k.weight", hp.n_embd, k_width);
  l.wv = ld.matrix(p + "attn_v.weight", hp.n_embd, v_width);
  l.wo = ld.matrix(p + "attn_output.weight", int64_t(hp.n_head) * hp.head_dim_v, hp.n_embd);
  l.bq = ld.vector_optional(p + "attn_q.bias", q_width);
  l.bk = ld.vector_optional(p + "attn_k.bias", k_width);
  l.bv = ld.vector_optional(p + "attn_v.bias", v_width);
}

void load_ffn(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l) {
  const std::string p = layer_prefix(il);
  l.ffn_norm = ld.vector(p + "ffn_norm.weight", hp.n_embd);
  l.ffn_gate = ld.matrix(p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
  l.ffn_up = ld.matrix(p + "ffn_up.weight", hp.n_embd, hp.n_ff);
  l.ffn_down = ld.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
}

void load_qk_norm(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l) {
  const std::string p = layer_prefix(il);
  l.attn_q_norm = ld.vector(p + "attn_q_norm.weight", hp.head_dim_k);
  l.attn_k_norm = ld.vector(p + "attn_k_norm.weight", hp.head_dim_k);
}

void load_gemma_layer(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l,
                      bool qk_norm) {
  const std::string p = layer_prefix(il);
  load_attention(ld, hp, il, l);
  if (qk_norm) load_qk_norm(ld, hp, il, l);
  l.attn_post_norm = ld.vector(p + "post_attention_norm.weight", hp.n_embd);
  load_ffn(ld, hp, il, l);
  l.ffn_post_norm = ld.vector(p + "post_ffw_norm.weight", hp.n_embd);
}

void load_moe_ffn(model_loader& ld, const model_hparams& hp, int32_t il, layer_weights& l) {
  const std::string p = layer_prefix(il);
  l.ffn_norm = ld.vector(p + "ffn_norm.weight", hp.n_embd);
  l.ffn_gate_inp = ld.matrix(p + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert);
  l.ffn_gate_exps = ld.experts(p + "ffn_gate_exps.weight", hp.n_embd, hp.n_ff_exp, hp.n_expert);
  l.ffn_up_exps = ld.experts(p + "ffn_up_exps.weight", hp.n_embd, hp.n_ff_exp, hp.n_expert);
  l.ffn_down_exps = ld.experts(p + "ffn_down_exps.weight", hp.n_ff_exp, hp.n_embd, hp.n_expert);
}

void forward_decoder(const model& m, forward_batch& fb, const block_style& style) {
  const model_hparams& hp = m.hparams();
  const model_weights& w = m.weights();
  backend& be = m.backend();
  const batch_views b(fb);
  const attention_params sliding = attention_params_of(hp, true);
  const attention_params global = attention_params_of(hp, false);

  const layer_range& layers = m.layers();
  if (layers.has_input()) {
    be.get_rows(w.tok_embd, b.ids, b.inp);
    name_intermediate(fb, be, b.inp, "inp_embd", -1);
    if (style.scale_embeddings) {
      be.scale(b.inp, std::sqrt(float(hp.n_embd)), b.inp);
      name_intermediate(fb, be, b.inp, "inp_scaled", -1);
    }
  }
  for (int32_t il = layers.first; il < layers.end; ++il) {
    const layer_weights& l = w.layers[size_t(il)];
    be.rms_norm(b.inp, l.attn_norm, hp.norm_eps, b.cur);
    name_intermediate(fb, be, b.cur, "attn_norm", il);
    self_attention(m, l, il, fb, b, layer_slides(hp, il) ? sliding : global,
                   rope_params_of(hp, il));
    if (l.attn_post_norm.present()) {
      be.rms_norm(b.attn_out, l.attn_post_norm, hp.norm_eps, b.attn_out);
      name_intermediate(fb, be, b.attn_out, "attn_post_norm", il);
    }
    be.add(b.attn_out, b.inp, b.inp);
    name_intermediate(fb, be, b.inp, "ffn_inp", il);
    be.rms_norm(b.inp, l.ffn_norm, hp.norm_eps, b.cur);
    name_intermediate(fb, be, b.cur, "ffn_norm", il);
    if (l.ffn_gate_inp.present()) {
      moe_feed_forward(m, l, il, fb, b);
    } else {
      const backend::product gate_up[] = {{&l.ffn_gate, nullptr, &b.gate},
                                          {&l.ffn_up, nullptr, &b.up}};
      be.mul_mats(b.cur, gate_up);
      name_intermediate(fb, be, b.gate, "ffn_gate", il);
      name_intermediate(fb, be, b.up, "ffn_up", il);
      if (style.gelu) {
        be.geglu(b.gate, b.up, b.gate);
        name_intermediate(fb, be, b.gate, "ffn_geglu", il);
      } else {
        be.swiglu(b.gate, b.up, b.gate);
        name_intermediate(fb, be, b.gate, "ffn_swiglu", il);
      }
      be.mul_mat(l.ffn_down, b.gate, nullptr, b.ffn_out);
      name_intermediate(fb, be, b.ffn_out, "ffn_out", il);
    }
    if (l.ffn_post_norm.present()) {
      be.rms_norm(b.ffn_out, l.ffn_post_norm, hp.norm_eps, b.ffn_out);
      name_intermediate(fb, be, b.ffn_out, "ffn_post_norm", il);
    }
    be.add(b.ffn_out, b.inp, b.inp);
    name_intermediate(fb, be, b.inp, "l_out", il);
  }
  if (layers.has_output(hp.n_layer)) output_logits(m, fb, b);
}

}  // namespace hearth
