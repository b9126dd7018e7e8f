// Qwen2 / Qwen2.5: the Llama block with biases on Q, K and V, rotary embeddings on half-split
// ("neox") pairs, the rope base from metadata (often 1e6), and the output tied to the embedding
// in the small models (no output.weight).
#include "engine/architecture.h"
#include "engine/models/transformer.h"

namespace hearth {
namespace {

class qwen2_architecture final : public architecture {
 public:
  std::string_view name() const override { return "qwen2"; }

  void load(model_loader& ld, model_hparams& hp, model_weights& w) const override {
    hp.rope.neox = true;
    load_embeddings_and_output(ld, hp, w);
    load_layers(ld, hp, w, [&](int32_t il, layer_weights& l) {
      load_attention(ld, hp, il, l);
      const std::string p = layer_prefix(il);
      // Qwen2 always has the biases: a file without them is not a Qwen2 conversion. The ones
      // load_attention found are not bound twice (each binding counts in weight_bytes).
      if (!l.bq.present()) l.bq = ld.vector(p + "attn_q.bias", int64_t(hp.n_head) * hp.head_dim_k);
      if (!l.bk.present())
        l.bk = ld.vector(p + "attn_k.bias", int64_t(hp.n_head_kv) * hp.head_dim_k);
      if (!l.bv.present())
        l.bv = ld.vector(p + "attn_v.bias", int64_t(hp.n_head_kv) * hp.head_dim_v);
      load_ffn(ld, hp, il, l);
    });
  }

  void forward(const model& m, forward_batch& fb) const override { forward_decoder(m, fb, {}); }
};

}  // namespace

std::unique_ptr<architecture> make_qwen2_architecture() {
  return std::make_unique<qwen2_architecture>();
}

}  // namespace hearth
