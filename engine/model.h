// A loaded model: hyperparameters, vocabulary, and weights bound to a backend. Loading checks
// every tensor's type and shape and reports the first mismatch with expected vs actual.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/io/gguf.h"
#include "engine/layer-range.h"
#include "engine/model-file.h"
#include "engine/model-hparams.h"
#include "engine/tokenizer/vocab.h"

namespace hearth {

// Weights of one transformer block; absent optional tensors have data == nullptr.
struct layer_weights {
  tensor attn_norm;       // F32 [n_embd]
  tensor wq;              // [n_embd -> n_head * head_dim_k]
  tensor wk;              // [n_embd -> n_head_kv * head_dim_k]
  tensor wv;              // [n_embd -> n_head_kv * head_dim_v]
  tensor wo;              // [n_head * head_dim_v -> n_embd]
  tensor bq, bk, bv;      // optional biases F32
  tensor attn_post_norm;  // optional F32 [n_embd]: norm of the attention output (gemma2)
  tensor ffn_norm;        // F32 [n_embd]
  tensor ffn_gate;        // [n_embd -> n_ff]
  tensor ffn_up;          // [n_embd -> n_ff]
  tensor ffn_down;        // [n_ff -> n_embd]
  tensor ffn_post_norm;   // optional F32 [n_embd]: norm of the feed-forward output (gemma2)
  tensor attn_q_norm;     // optional F32 [head_dim_k]: per-head RMSNorm of q, k (qwen3, gemma3)
  tensor attn_k_norm;
  // Mixture of experts (instead of ffn_gate/up/down): the router and n_expert stacked matrices.
  tensor ffn_gate_inp;   // F32 [n_embd -> n_expert]
  tensor ffn_gate_exps;  // [n_expert][n_embd -> n_ff_exp]
  tensor ffn_up_exps;    // [n_expert][n_embd -> n_ff_exp]
  tensor ffn_down_exps;  // [n_expert][n_ff_exp -> n_embd]
};

struct model_weights {
  tensor tok_embd;     // [n_vocab rows of n_embd]
  tensor output_norm;  // F32 [n_embd]
  tensor output;       // [n_embd -> n_vocab]; the embedding table when tied
  tensor rope_freqs;   // optional F32 [n_dims / 2] frequency divisors (Llama 3.1)
  std::vector<layer_weights> layers;
  // Row ranges of fused file tensors (phi3's attn_qkv, ffn_up) bound as separate weights; each
  // backend weight() reads its description, so they live as long as the model.
  std::deque<gguf_tensor> parts;
};

struct model_params {
  int n_threads = 0;  // <= 0: one per hardware thread
  // The backend the weights are bound to; empty: the CPU backend with n_threads threads. Device
  // backends come from backends/ (backends/select.h chooses one), which the engine does not depend
  // on. Called once per load; what it throws is reported as a loading error.
  std::function<std::unique_ptr<backend>()> make_backend;
  // Called while weights are paged in: (bytes done, bytes total).
  std::function<void(uint64_t, uint64_t)> progress;
  // The layers to load (a pipeline stage's share, engine/layer-range.h); by default all of them.
  // Only their tensors are bound, with the embeddings when the range starts at layer 0 and the
  // output norm and head when it ends at the last layer.
  layer_range layers;
};

class architecture;

class model {
 public:
  // Loads the opened model `file` onto the backend of params.make_backend (the CPU backend when
  // it is empty); the model keeps the file's mapping. Throws std::runtime_error whose message
  // names the file and what is wrong (an unsupported type, a tensor of the wrong shape, ...).
  static std::unique_ptr<model> load(model_file file, const model_params& params);
  // The same from model::open(path).
  static std::unique_ptr<model> load(const std::string& path, const model_params& params);
  // model_file::open(path) (a GGUF file or a Hugging Face directory), its error thrown as load()
  // throws it: "loading model PATH: what is wrong".
  static model_file open(const std::string& path);
  ~model();

  const model_hparams& hparams() const { return hparams_; }
  const model_weights& weights() const { return weights_; }
  const hearth::vocab& vocab() const { return vocab_; }
  const gguf_file& file() const { return file_.gguf; }
  hearth::backend& backend() const { return *backend_; }
  const architecture& arch() const { return *arch_; }
  // The layers this model holds (resolved: end is a layer count); [0, n_layer) unless loaded as
  // a pipeline stage.
  const layer_range& layers() const { return layers_; }
  // Bytes of all weight tensors.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // "q8_0" for a file mostly of that type (model_file::dominant_type).
  std::string dominant_type() const { return file_.dominant_type(); }

 private:
  model() = default;
  model_file file_;
  model_hparams hparams_;
  model_weights weights_;
  hearth::vocab vocab_;
  std::unique_ptr<hearth::backend> backend_;
  std::unique_ptr<architecture> arch_;
  layer_range layers_;
  uint64_t weight_bytes_ = 0;
};

// Binds tensors of a file to a backend, checking each one's type and shape. Errors throw
// std::runtime_error naming the tensor, the expected and the actual shape or type.
class model_loader {
 public:
  // `layers`: the resolved range being loaded (load_layers and load_embeddings_and_output in
  // engine/models/transformer.h bind only what it holds).
  model_loader(const gguf_file& f, hearth::backend& b, std::deque<gguf_tensor>& parts,
               layer_range layers)
      : file_(f), backend_(b), parts_(parts), layers_(layers) {}

  const layer_range& layers() const { return layers_; }

  // A weight used in matrix products: any type the backend computes with.
  tensor matrix(const std::string& name, int64_t n_in, int64_t n_out);
  tensor matrix_optional(const std::string& name, int64_t n_in, int64_t n_out);
  // Output rows [first, first + n) of a fused matrix of `n_out_total` outputs, as its own
  // weight: a matrix product with it computes exactly those outputs of the fused product.
  // n_expert matrices [n_out, n_in] stacked in one tensor (mixture-of-experts weights).
  tensor experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert);
  tensor matrix_rows(const std::string& name, int64_t n_in, int64_t n_out_total, int64_t first,
                     int64_t n);
  // An F32 vector (norm weights, biases).
  tensor vector(const std::string& name, int64_t n);
  tensor vector_optional(const std::string& name, int64_t n);

  // Family hyperparameters: `<arch>.<key>` (engine/model-hparams.h). Required ones throw naming
  // the key when absent.
  uint32_t u32(const std::string& key) const { return hparam_u32(file_, key); }
  uint32_t u32_or(const std::string& key, uint32_t fallback) const {
    return hparam_u32_or(file_, key, fallback);
  }
  float f32_or(const std::string& key, float fallback) const {
    return hparam_f32_or(file_, key, fallback);
  }

  const gguf_file& file() const { return file_; }
  uint64_t bound_bytes() const { return bound_bytes_; }

 private:
  void check(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1,
             int64_t ne2 = 1) const;
  tensor bind(const gguf_tensor& g, bool matrix_type, int64_t ne0, int64_t ne1, int64_t ne2 = 1);
  const gguf_file& file_;
  hearth::backend& backend_;
  std::deque<gguf_tensor>& parts_;
  layer_range layers_;
  uint64_t bound_bytes_ = 0;
};

}  // namespace hearth
