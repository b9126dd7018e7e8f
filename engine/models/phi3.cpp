// Phi-3 / Phi-3.5 (mini, medium): the Llama block with one fused Q|K|V matrix (attn_qkv) and
// one fused gate|up matrix (ffn_up, first half gate, second half up), half-split ("neox") rope,
// and a sliding window whose length comes from metadata on every layer.
//
// The fused matrices are bound as row ranges (model_loader::matrix_rows): the product with a
// range computes exactly those outputs of the fused product, with no copy of the weights.
#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class phi3_architecture final : public architecture {
 public:
  std::string_view name() const override { return "phi3"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    hp.n_swa = int32_t(ld.u32_or("phi3.attention.sliding_window", 0));
    // The 128k-context files rescale rope per dimension (LongRoPE) with factors chosen by
    // context length and an attention factor; computing them wrongly would go unnoticed, so
    // they are refused until implemented.
    if (ld.file().find_tensor("rope_factors_long.weight") ||
        ld.file().find_tensor("rope_factors_short.weight")) {
      throw std::runtime_error(
          "Phi-3 LongRoPE (128k-context) files are not supported yet; use a 4k-context file");
    }
    load_embeddings_and_output(ld, hp, w);

    const int64_t q_width = int64_t(hp.n_head) * hp.head_dim_k;
    const int64_t k_width = int64_t(hp.n_head_kv) * hp.head_dim_k;
    const int64_t v_width = int64_t(hp.n_head_kv) * hp.head_dim_v;
    const int64_t qkv = q_width + k_width + v_width;
    load_layers(ld, hp, w, [&](int32_t il, layer_weights& l) {
      const std::string p = layer_prefix(il);
      l.attn_norm = ld.vector(p + "attn_norm.weight", hp.n_embd);
      const std::string fused_qkv = p + "attn_qkv.weight";
      l.wq = ld.matrix_rows(fused_qkv, hp.n_embd, qkv, 0, q_width);
      l.wk = ld.matrix_rows(fused_qkv, hp.n_embd, qkv, q_width, k_width);
      l.wv = ld.matrix_rows(fused_qkv, hp.n_embd, qkv, q_width + k_width, v_width);
      l.wo = ld.matrix(p + "attn_output.weight", int64_t(hp.n_head) * hp.head_dim_v, hp.n_embd);
      l.ffn_norm = ld.vector(p + "ffn_norm.weight", hp.n_embd);
      const std::string fused_up = p + "ffn_up.weight";
      l.ffn_gate = ld.matrix_rows(fused_up, hp.n_embd, 2 * int64_t(hp.n_ff), 0, hp.n_ff);
      l.ffn_up = ld.matrix_rows(fused_up, hp.n_embd, 2 * int64_t(hp.n_ff), hp.n_ff, hp.n_ff);
      l.ffn_down = ld.matrix(p + "ffn_down.weight", hp.n_ff, hp.n_embd);
    });
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }
};

}  // namespace

std::unique_ptr<architecture> make_phi3_architecture() {
  return std::make_unique<phi3_architecture>();
}

}  // namespace hearth
