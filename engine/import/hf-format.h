// What the Hugging Face importer (engine/import/hf-import.h) and exporter
// (engine/convert/hf-export.h) share: the architectures both directions know, one table of tensor
// names and shapes for both directions, the adjacent-pair rope row order, and F32/F16/BF16 element
// conversion. Internal to the engine; errors are thrown (std::runtime_error) and turned into a
// result by the importer's and exporter's entry points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io/tensor-type.h"

namespace hearth::hf {

[[noreturn]] void fail(const std::string& what);

// How a family's checkpoints hold a mixture of experts (GGUF stacks the experts of a layer into
// blk.N.ffn_{gate,up,down}_exps with the router as ffn_gate_inp).
enum class moe_style {
  none,
  qwen,     // mlp.gate, mlp.experts.E.{gate,up,down}_proj (Qwen3-MoE)
  mixtral,  // block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2}
};

struct hf_arch {
  std::string_view gguf;        // general.architecture
  std::string_view model_type;  // config.json model_type written by the converter
  std::string_view hf_class;    // config.json architectures[0]
  bool permute_qk;              // llama: Q/K rows reordered for adjacent-pair rope
  bool norm_plus_one;           // gemma: HF stores w, GGUF stores 1 + w
  bool fused;                   // phi3: qkv_proj and gate_up_proj
  bool post_norms;              // gemma2: four norms per block
  bool tied_default;            // tie_word_embeddings when config.json does not say
  int64_t default_head_dim;     // head_dim when config.json does not say; 0: hidden / heads
  double default_eps;           // rms_norm_eps when config.json does not say (HF's defaults)
  bool qk_norm;                 // qwen3, gemma3: self_attn.{q,k}_norm per head
  moe_style moe;                // experts instead of the feed-forward
};

// The architectures the converters know, by general.architecture and whether the model has
// experts (llama with experts is Mixtral); nullptr for others.
const hf_arch* arch_by_gguf(std::string_view name, bool experts = false);

// --- tensors: the names and shapes of both formats, one table for both directions ----------------

enum class tensor_kind { matrix, norm, bias };

struct tensor_rule {
  std::string hf;
  std::string gguf;
  tensor_kind kind;
  int64_t rope_groups;         // > 0: rows reordered for adjacent-pair rope, this many heads
  std::vector<int64_t> shape;  // HF order (outermost first)
  bool required;
  // >= 0: this HF tensor is expert `expert` of the GGUF tensor, which stacks n_expert of them
  // (GGUF shape {shape[1], shape[0], n_expert}).
  int64_t expert = -1;
  int64_t n_expert = 0;
};

struct model_dims {
  const hf_arch* arch = nullptr;
  int64_t n_vocab = 0, n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_expert = 0, n_ff_exp = 0;  // mixture of experts (arch->moe)
  bool tied = false;                   // no lm_head: the output matrix is the embedding table
  bool qkv_bias = false;               // q/k/v biases required (qwen2); optional elsewhere
};

std::vector<tensor_rule> tensor_rules(const model_dims& d);

// Adjacent-pair rope (llama as GGUF stores it) wants each head's rows interleaved: GGUF row
// 2b + a of a head holds HF row a * half + b (convert_hf_to_gguf.py LlamaModel.permute). Returns,
// for every output row, the input row it comes from.
std::vector<int64_t> rope_row_sources(int64_t rows, int64_t groups, bool to_gguf);

// "[a, b]" for a shape in HF order.
std::string shape_text(const std::vector<int64_t>& shape);

// Bytes of one element of an F32, F16 or BF16 tensor.
int64_t elem_size(tensor_type t);
// One F32, F16 or BF16 element at `p` as a float, and back.
float to_f32(tensor_type t, const uint8_t* p);
void from_f32(tensor_type t, float f, uint8_t* p);

}  // namespace hearth::hf
