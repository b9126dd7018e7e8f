// The model families, one row each: what the loader (engine/architecture.cpp), the Hugging Face
// importer (hf-import.cpp) and the exporter (engine/convert/hf-export.cpp) look up about a
// family — its general.architecture, its Hugging Face names, its tensor layout and config.json
// defaults, and the loader's implementation of its forward pass (engine/models/<family>.cpp).
// Adding a family: a row in model-family.cpp and its file under engine/models/ (engine/README.md,
// "Adding a model family").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace hearth {

// engine/architecture.h: the runtime's forward pass of a family. Only the loader calls a row's
// `make`; the importer and exporter, below the runtime, read the names and the layout.
class architecture;

// How a family's checkpoints hold a mixture of experts (GGUF stacks the experts of a layer into
// blk.N.ffn_{gate,up,down}_exps with the router as ffn_gate_inp).
enum class moe_style {
  none,
  qwen,     // mlp.gate, mlp.experts.E.{gate,up,down}_proj (Qwen3-MoE)
  mixtral,  // block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2}
};

struct model_family {
  // --- GGUF and the loader
  std::string_view gguf;                    // general.architecture
  std::unique_ptr<architecture> (*make)();  // the loader's implementation (engine/models/)
  moe_style moe = moe_style::none;          // experts instead of the feed-forward

  // --- Hugging Face names (config.json); each list is read, its first entry written
  std::array<std::string_view, 2> hf_model_types;  // model_type
  std::array<std::string_view, 2> hf_classes;      // architectures[0]
  // A multimodal model_type whose text_config is this family's language model ("": none).
  std::string_view hf_multimodal_type = {};

  // --- tensor layout (engine/import/hf-format.h tensor_rules)
  bool permute_qk = false;     // llama: Q/K rows reordered for adjacent-pair rope
  bool norm_plus_one = false;  // gemma: HF stores w, GGUF stores 1 + w
  bool fused = false;          // phi3: qkv_proj and gate_up_proj
  bool post_norms = false;     // gemma2: four norms per block
  bool qk_norm = false;        // qwen3, gemma3: self_attn.{q,k}_norm per head
  bool qkv_bias = false;       // q/k/v biases required (qwen2); optional elsewhere

  // --- config.json: defaults when it does not say, and the keys the family's configs have
  bool tied_default = false;          // tie_word_embeddings
  int64_t default_head_dim = 0;       // head_dim; 0: hidden / heads
  double default_eps = 1e-6;          // rms_norm_eps (HF's defaults)
  double default_rope_theta = 10000;  // rope_theta
  bool sliding_window = false;        // sliding_window <-> attention.sliding_window (null: none)
  bool partial_rotary = false;        // partial_rotary_factor written when rope is partial
  bool gelu = false;                  // hidden_act gelu_pytorch_tanh (else silu)
  bool attention_bias_key = false;    // attention_bias written
  bool mlp_bias_key = false;          // mlp_bias written (false)
};

// Every family, in the order error messages list them.
std::span<const model_family> model_families();

// The family of a general.architecture value and whether the model has experts (llama with
// experts is Mixtral); a family that is one or the other (qwen3moe always has experts) is found
// either way, and the loader refuses a file without the experts it needs. nullptr for others.
const model_family* model_family_by_gguf(std::string_view name, bool experts = false);

// The family of a config.json model_type or architectures[0] value; nullptr for others.
const model_family* model_family_by_hf(std::string_view name);

// "llama, qwen2, ...": the general.architecture values, for error messages.
std::string model_family_gguf_names();
// "llama, mistral, ...": the model_type values (multimodal ones last), for error messages.
std::string model_family_hf_names();

}  // namespace hearth
