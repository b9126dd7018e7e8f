// Gemma 3 (1B–27B): Gemma 2's block (scaled embeddings, GELU, norms after attention and after
// the feed-forward) without its soft-caps, plus a per-head RMSNorm of queries and keys. Five
// local layers with a sliding window, then one global layer (sliding_window_pattern 6); local
// layers rotate with their own base (rope.freq_base_swa, 10,000) and no scaling, global ones
// with the file's base and its rope scaling (linear ×8 in 4B and up).
//
// Query scale: 1/sqrt(head_dim), except the 27B model (62 layers): 1/sqrt(n_embd / n_head), as
// the reference engine does (GGUF does not store query_pre_attn_scalar).
#include <cmath>
#include <stdexcept>

#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class gemma3_architecture final : public architecture {
 public:
  std::string_view name() const override { return "gemma3"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    hp.n_swa = int32_t(ld.u32("gemma3.attention.sliding_window"));
    hp.swa_pattern = int32_t(ld.u32_or("gemma3.attention.sliding_window_pattern", 6));
    hp.swa_freq_base = ld.f32_or("gemma3.rope.freq_base_swa", 10000.0f);
    if (hp.n_swa <= 0 || hp.swa_pattern <= 0 || !(hp.swa_freq_base > 0)) {
      throw std::runtime_error(
          "gemma3 sliding_window, sliding_window_pattern and rope.freq_base_swa must be positive");
    }
    const int32_t query_dim = hp.n_layer == 62 ? hp.n_embd / hp.n_head : hp.head_dim_k;
    hp.query_scale = 1.0f / std::sqrt(float(query_dim));

    load_embeddings_and_output(ld, hp, w);
    load_layers(ld, hp, w,
                [&](int32_t il, layer_weights& l) { load_gemma_layer(ld, hp, il, l, true); });
  }

  void forward(const model& m, forward_batch& fb) const override {
    forward_decoder(m, fb, {.scale_embeddings = true, .gelu = true});
  }
};

}  // namespace

std::unique_ptr<architecture> make_gemma3_architecture() {
  return std::make_unique<gemma3_architecture>();
}

}  // namespace hearth
