// Gemma (1): embeddings scaled by sqrt(n_embd), half-split ("neox") rope, a head size from
// attention.key_length that need not be n_embd / n_head, a GELU-gated feed-forward (tanh form),
// and the output tied to the embedding. The converter already added 1 to the RMSNorm weights
// (Gemma normalises by 1 + w), so they are used as the file stores them.
#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class gemma_architecture final : public architecture {
 public:
  std::string_view name() const override { return "gemma"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    load_embeddings_and_output(ld, hp, w);
    load_layers(ld, hp, w, [&](int32_t il, layer_weights& l) {
      load_attention(ld, hp, il, l);
      load_ffn(ld, hp, il, l);
    });
  }

  void forward(const model& m, forward_batch& fb) const override {
    forward_decoder(m, fb, {.scale_embeddings = true, .gelu = true});
  }
};

}  // namespace

std::unique_ptr<architecture> make_gemma_architecture() {
  return std::make_unique<gemma_architecture>();
}

}  // namespace hearth
