// quantize_rows (each type's reference quantizer, engine/io/quantize-row.cpp, reached through the
// type traits) and llama-quantize's file types: the per-tensor type choice follows llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp, build 4748).
#include "engine/convert/quantize.h"

#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "engine/io/type-traits.h"

namespace hearth {

bool can_quantize(tensor_type t) {
  return tensor_type_traits_of(t).from_float != nullptr;
}

void quantize_rows(tensor_type t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row) {
  if (!can_quantize(t))
    throw std::invalid_argument("cannot quantize to " + std::string(tensor_type_name(t)));
  const int64_t block = tensor_type_layout_of(uint32_t(t))->block_elems;
  if (n_per_row <= 0 || n_per_row % block != 0 || n_rows < 0) {
    throw std::invalid_argument("cannot quantize rows of " + std::to_string(n_per_row) +
                                " values to " + std::string(tensor_type_name(t)) +
                                ": the row length must be a positive multiple of " +
                                std::to_string(block));
  }
  // Every format here works block by block and a row is whole blocks, so all rows can be
  // quantized as one run (as ggml's quantize_chunk does).
  tensor_type_traits_of(t).from_float(src, dst, n_rows * n_per_row);
}

// --- file types ---------------------------------------------------------------------------

namespace {

// The file types this quantizer writes (named by their LLAMA_FTYPE: llama_ftype_name).
struct file_type_row {
  file_type ft;
  uint32_t id;               // LLAMA_FTYPE_* (llama.h)
  tensor_type default_type;  // what most matrices become
};

constexpr file_type_row k_file_types[] = {
    {file_type::f32, 0, tensor_type::f32},      {file_type::f16, 1, tensor_type::f16},
    {file_type::bf16, 32, tensor_type::bf16},   {file_type::q8_0, 7, tensor_type::q8_0},
    {file_type::q4_0, 2, tensor_type::q4_0},    {file_type::q4_k_s, 14, tensor_type::q4_k},
    {file_type::q4_k_m, 15, tensor_type::q4_k}, {file_type::q5_k_s, 16, tensor_type::q5_k},
    {file_type::q5_k_m, 17, tensor_type::q5_k}, {file_type::q6_k, 18, tensor_type::q6_k},
};

const file_type_row& row_of(file_type ft) {
  for (const auto& r : k_file_types)
    if (r.ft == ft) return r;
  throw std::invalid_argument("unknown file type");
}

bool is_quantized(tensor_type t) {
  return t != tensor_type::f32 && t != tensor_type::f16 && t != tensor_type::bf16;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// "blk.N." -> N; -1 for tensors outside the blocks.
int layer_of(std::string_view name) {
  int layer = -1;
  const std::string s(name);
  if (std::sscanf(s.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama.cpp's rule for which layers of attn_v / ffn_down get more bits in the _M mixes: the
// first and last eighth, and every third layer in between.
bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama.cpp's LLM_TYPE_70B for the families here (llama-model.cpp: Llama 2/3 70B have 80 layers
// and grouped KV heads, an 80-layer model without is 65B; Qwen2 72B has 80 layers).
bool is_70b(const quant_model_info& m) {
  if (m.n_layer != 80) return false;
  if (m.arch == "llama") return m.n_head != m.n_head_kv;
  return m.arch == "qwen2";
}

int64_t block_elems(tensor_type t) {
  return tensor_type_layout_of(uint32_t(t))->block_elems;
}

}  // namespace

std::optional<file_type> file_type_from_name(std::string_view name) {
  std::string s(name);
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& r : k_file_types)
    if (file_type_name(r.ft) == s) return r.ft;
  return std::nullopt;
}

std::string_view file_type_name(file_type ft) {
  return *llama_ftype_name(row_of(ft).id);
}

std::string file_type_names() {
  std::string out;
  for (const auto& r : k_file_types)
    out += (out.empty() ? "" : ", ") + std::string(file_type_name(r.ft));
  return out;
}

uint32_t file_type_id(file_type ft) {
  return row_of(ft).id;
}

tensor_type tensor_type_for(file_type ft, const quant_model_info& m, std::string_view name,
                            std::span<const int64_t> ne) {
  // ggml_n_dims: trailing dimensions of 1 do not count.
  int n_dims = 1;
  for (size_t d = 0; d < ne.size(); ++d)
    if (ne[d] > 1) n_dims = int(d) + 1;
  // What llama-quantize leaves alone: vectors, norms, and anything not named *weight.
  if (n_dims < 2 || !ends_with(name, "weight") || contains(name, "_norm.weight") ||
      contains(name, "ffn_gate_inp.weight")) {
    return tensor_type::f32;
  }
  tensor_type t = row_of(ft).default_type;
  // Only the quantized file types get a mix (llama-quantize skips llama_tensor_get_type for
  // F32/F16/BF16).
  if (!is_quantized(t)) return t;

  const bool m_mix = ft == file_type::q4_k_m || ft == file_type::q5_k_m;
  const int64_t nx = ne[0];
  const int layer = layer_of(name);

  // The output projection (or the token embeddings that stand in for it when tied) decides
  // most of the logits' precision: Q6_K unless the file is Q8_0 anyway.
  if (name == "output.weight" || (!m.has_output && name == "token_embd.weight")) {
    if (nx % block_elems(t) != 0) {
      t = tensor_type::q8_0;
    } else if (t != tensor_type::q8_0) {
      t = tensor_type::q6_k;
    }
  } else if (name == "token_embd.weight") {
    // llama.cpp only changes it for the IQ and ternary types.
  } else if (contains(name, "attn_v.weight")) {
    // llama.cpp counts attn_v tensors in the order of blk numbers, so its counter is the layer.
    if (m_mix && use_more_bits(layer, m.n_layer)) {
      t = tensor_type::q6_k;
    } else if (ft == file_type::q4_k_s && layer < 4) {
      t = tensor_type::q5_k;
    }
    // 70B shares one attn_v between 8 query heads: it is 8x smaller than attn_q, so more bits
    // cost little.
    if (is_70b(m) && (t == tensor_type::q3_k || t == tensor_type::q4_k)) t = tensor_type::q5_k;
    // llama.cpp's rule for 8-expert models (Mixtral 8x7B; not Qwen3-30B-A3B, which has 128):
    // attention is a small share of such a model, so its V (and K, below) go to Q8_0 in every
    // quantized file type.
    if (m.n_expert == 8) t = tensor_type::q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (m.n_expert == 8) t = tensor_type::q8_0;
  } else if (contains(name, "attn_output.weight")) {
    // ... and the attention output one step up from 4 bits (of the file types we make, Q4_K_S and
    // Q4_K_M).
    if (m.n_expert == 8 && (ft == file_type::q4_k_s || ft == file_type::q4_k_m))
      t = tensor_type::q5_k;
  } else if (contains(name, "ffn_down")) {
    if (m_mix && use_more_bits(layer, m.n_layer)) {
      t = tensor_type::q6_k;
    } else if (ft == file_type::q4_k_s && layer < m.n_layer / 8) {
      t = tensor_type::q5_k;
    }
  } else if (contains(name, "attn_qkv.weight")) {
    // Phi-3's fused q/k/v: one tensor holding attn_v, so it gets a step up in the _M mixes.
    if (ft == file_type::q4_k_m) {
      t = tensor_type::q5_k;
    } else if (ft == file_type::q5_k_m) {
      t = tensor_type::q6_k;
    }
  }
  // attn_q, ffn_gate and ffn_up (Phi-3's fused gate/up and the experts' included) change only
  // for file types we do not make (Q2_K, Q3_K, IQ*).

  // Rows that the chosen type's blocks do not divide: llama.cpp's fallback to a 32-value type of
  // about the same size, and F16 when even that does not fit.
  if (nx % block_elems(t) != 0) {
    switch (t) {
      case tensor_type::q4_k:
        t = tensor_type::q5_0;
        break;
      case tensor_type::q5_k:
        t = tensor_type::q5_1;
        break;
      case tensor_type::q6_k:
        t = tensor_type::q8_0;
        break;
      default:
        throw std::invalid_argument("tensor '" + std::string(name) + "' has rows of " +
                                    std::to_string(nx) + " values, which " +
                                    std::string(tensor_type_name(t)) +
                                    " blocks do not divide (llama-quantize refuses it too)");
    }
    if (nx % block_elems(t) != 0) t = tensor_type::f16;
  }
  return t;
}

}  // namespace hearth
