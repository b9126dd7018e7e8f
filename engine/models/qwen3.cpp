// Qwen3 (dense, 0.6B–32B) and Qwen3-MoE (30B-A3B, 235B-A22B): Qwen2's block without the q/k/v
// biases, plus a per-head RMSNorm of the queries and keys (attn_q_norm, attn_k_norm) before
// rope. In qwen3moe every layer has a mixture of experts instead of the feed-forward: a softmax
// router picks expert_used_count of expert_count experts per token, each
// expert_feed_forward_length wide, their weights renormalised to sum to 1 (norm_topk_prob).
#include <stdexcept>
#include <string>

#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class qwen3_architecture final : public architecture {
 public:
  explicit qwen3_architecture(bool experts) : experts_(experts) {}

  std::string_view name() const override { return experts_ ? "qwen3moe" : "qwen3"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    if (experts_ && hp.n_expert == 0) {
      throw std::runtime_error("qwen3moe.expert_count is missing or 0");
    }
    hp.rope.neox = true;
    load_embeddings_and_output(ld, hp, w);
    load_layers(ld, hp, w, [&](int32_t il, layer_weights& l) {
      load_attention(ld, hp, il, l);
      load_qk_norm(ld, hp, il, l);
      if (experts_) {
        load_moe_ffn(ld, hp, il, l);
      } else {
        load_ffn(ld, hp, il, l);
      }
    });
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }

 private:
  bool experts_;
};

}  // namespace

std::unique_ptr<architecture> make_qwen3_architecture() {
  return std::make_unique<qwen3_architecture>(false);
}

std::unique_ptr<architecture> make_qwen3moe_architecture() {
  return std::make_unique<qwen3_architecture>(true);
}

}  // namespace hearth
