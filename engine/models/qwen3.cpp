// Qwen3 (dense, 0.6B–32B): Qwen2's block without the q/k/v biases, plus a per-head RMSNorm of
// the queries and keys (attn_q_norm, attn_k_norm) before rope.
#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class qwen3_architecture final : public architecture {
 public:
  std::string_view name() const override { return "qwen3"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    load_embeddings_and_output(ld, hp, w);
    w.layers.resize(size_t(hp.n_layer));
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      layer_weights& l = w.layers[size_t(il)];
      load_attention(ld, hp, il, l);
      load_qk_norm(ld, hp, il, l);
      load_ffn(ld, hp, il, l);
    }
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }
};

}  // namespace

std::unique_ptr<architecture> make_qwen3_architecture() {
  return std::make_unique<qwen3_architecture>();
}

}  // namespace hearth
