// The llama architecture as GGUF stores it: Llama 1/2/3, TinyLlama, Mistral, SmolLM, and
// Mixtral (expert_count > 0: a mixture of experts in every layer, 2 of 8 per token).
// Pre-norm blocks with RMSNorm, rotary embeddings on adjacent pairs (the converter permutes Q and
// K rows for that), grouped-query attention, a SwiGLU feed-forward, tied or separate output.
#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class llama_architecture final : public architecture {
 public:
  std::string_view name() const override { return "llama"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = false;
    load_embeddings_and_output(ld, hp, w);
    w.rope_freqs = ld.vector_optional("rope_freqs.weight", hp.rope.n_dims / 2);
    load_layers(ld, hp, w, [&](int32_t il, layer_weights& l) {
      // Some llama-architecture conversions carry attention biases: load_attention takes them.
      load_attention(ld, hp, il, l);
      // Mixtral is this architecture with experts in place of the feed-forward.
      if (hp.n_expert > 0) {
        load_moe_ffn(ld, hp, il, l);
      } else {
        load_ffn(ld, hp, il, l);
      }
    });
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }
};

}  // namespace

std::unique_ptr<architecture> make_llama_architecture() {
  return std::make_unique<llama_architecture>();
}

}  // namespace hearth
