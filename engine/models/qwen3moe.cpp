// Qwen3-MoE (Qwen3-30B-A3B, 235B-A22B): Qwen3's attention, and in every layer a mixture of
// experts instead of the feed-forward: a softmax router picks expert_used_count of expert_count
// experts per token, each expert_feed_forward_length wide, their weights renormalised to sum
// to 1 (norm_topk_prob).
#include <stdexcept>

#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class qwen3moe_architecture final : public architecture {
 public:
  std::string_view name() const override { return "qwen3moe"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    if (hp.n_expert == 0) throw std::runtime_error("qwen3moe.expert_count is missing or 0");
    hp.rope.neox = true;
    load_embeddings_and_output(ld, hp, w);
    w.layers.resize(size_t(hp.n_layer));
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      layer_weights& l = w.layers[size_t(il)];
      load_attention(ld, hp, il, l);
      load_qk_norm(ld, hp, il, l);
      load_moe_ffn(ld, hp, il, l);
    }
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }
};

}  // namespace

std::unique_ptr<architecture> make_qwen3moe_architecture() {
  return std::make_unique<qwen3moe_architecture>();
}

}  // namespace hearth
