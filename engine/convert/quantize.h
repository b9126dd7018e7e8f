// Quantizers: F32 rows into every weight type the engine reads, written as ggml's reference
// quantizers (quantize_row_*_ref) write them, so a file we quantize equals llama-quantize's
// output for the same input; and the per-tensor type choice of llama-quantize's file types
// (Q4_K_M keeps attn_v/ffn_down of some layers and the output in Q6_K, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/io/tensor-type.h"

namespace hearth {

// Whether quantize_rows() can write type t.
bool can_quantize(tensor_type t);

// Quantizes `n_rows` rows of `n_per_row` values (a multiple of t's block size) from `src` into
// `dst`, which holds n_rows * tensor_type_row_bytes(t, n_per_row) bytes. Throws
// std::invalid_argument for a type can_quantize() refuses or a bad row length.
void quantize_rows(tensor_type t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row);

// A whole-file type as llama-quantize names them.
enum class file_type { f32, f16, bf16, q8_0, q4_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k };

// "q4_k_m", "Q4_K_M", "f16", ...; nothing when unknown.
std::optional<file_type> file_type_from_name(std::string_view name);
std::string_view file_type_name(file_type ft);
// The names file_type_from_name() accepts, comma separated (for error messages and --help).
std::string file_type_names();
// The value llama.cpp stores in general.file_type (LLAMA_FTYPE_MOSTLY_*; its name:
// engine/io/tensor-type.h llama_ftype_name).
uint32_t file_type_id(file_type ft);

// What the type choice needs to know about the model.
struct quant_model_info {
  std::string arch;        // general.architecture
  int n_layer = 0;         // blocks
  int n_head = 0;          // attention heads
  int n_head_kv = 0;       // key/value heads
  bool has_output = true;  // false when the output projection is tied to token_embd
  int n_expert = 0;        // experts of a mixture-of-experts model (<arch>.expert_count); 0: dense
};

// The type llama-quantize gives tensor `name` of shape `ne` in a file of type `ft`: 1-D tensors
// (norms, biases) stay F32; the rest follow llama.cpp's llama_tensor_get_type for that file type,
// including its fallback when a row length is not a multiple of the chosen type's block.
tensor_type tensor_type_for(file_type ft, const quant_model_info& m, std::string_view name,
                            std::span<const int64_t> ne);

}  // namespace hearth
