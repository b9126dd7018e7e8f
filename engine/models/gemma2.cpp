// Gemma 2: Gemma plus RMSNorms after attention and after the feed-forward (each before its
// residual add), soft-capped attention scores and final logits, and a sliding window on every
// other layer (even layers slide, odd layers see the whole context).
//
// Query scale: Google's reference scales queries by query_pre_attn_scalar^-1/2, which GGUF does
// not store; as the reference engine does, it is 1/sqrt(head_dim) except for the 27B model
// (46 layers), where it is 1/sqrt(n_embd / n_head).
#include <cmath>

#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class gemma2_architecture final : public architecture {
 public:
  std::string_view name() const override { return "gemma2"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    // Gemma 2's window when the file does not say (as the reference engine assumes).
    hp.n_swa = int32_t(ld.u32_or("gemma2.attention.sliding_window", 4096));
    hp.swa_pattern = 2;
    hp.attn_softcap = ld.f32_or("gemma2.attn_logit_softcapping", 50.0f);
    hp.final_softcap = ld.f32_or("gemma2.final_logit_softcapping", 30.0f);
    const int32_t query_dim = hp.n_layer == 46 ? hp.n_embd / hp.n_head : hp.head_dim_k;
    hp.query_scale = 1.0f / std::sqrt(float(query_dim));

    load_embeddings_and_output(ld, hp, w);
    load_layers(ld, hp, w,
                [&](int32_t il, layer_weights& l) { load_gemma_layer(ld, hp, il, l, false); });
  }

  void forward(const model& m, forward_batch& fb) const override {
    forward_decoder(m, fb, {.scale_embeddings = true, .gelu = true});
  }
};

}  // namespace

std::unique_ptr<architecture> make_gemma2_architecture() {
  return std::make_unique<gemma2_architecture>();
}

}  // namespace hearth
