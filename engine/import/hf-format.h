// What the Hugging Face importer (engine/import/hf-import.h) and exporter
// (engine/convert/hf-export.h) share besides the families (engine/import/model-family.h): one
// table of tensor names and shapes for both directions, the adjacent-pair rope row order, and
// F32/F16/BF16 element conversion. Internal to the engine; errors are thrown (std::runtime_error)
// and turned into a result by the importer's and exporter's entry points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/import/model-family.h"
#include "engine/io/tensor-type.h"

namespace hearth::hf {

[[noreturn]] void fail(const std::string& what);

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
  const model_family* family = nullptr;
  int64_t n_vocab = 0, n_embd = 0, n_ff = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_expert = 0, n_ff_exp = 0;  // mixture of experts (family->moe)
  bool tied = false;                   // no lm_head: the output matrix is the embedding table
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
