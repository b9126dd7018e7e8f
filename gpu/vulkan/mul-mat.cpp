// Matrix products and embedding-row lookup on stored weight types: mul_mat_vec.comp for few
// tokens, the tiled mul_mat.comp for many, get_rows.comp; all dequantize with dequant.glsl.
#include <stdexcept>
#include <string>

#include "gpu/vulkan/ops.h"

namespace hearth::vk {

const char* weight_variant(tensor_type t) {
  switch (t) {
    case tensor_type::f32:
      return "f32";
    case tensor_type::f16:
      return "f16";
    case tensor_type::bf16:
      return "bf16";
    case tensor_type::q8_0:
      return "q8_0";
    case tensor_type::q4_0:
      return "q4_0";
    case tensor_type::q4_k:
      return "q4_k";
    case tensor_type::q5_k:
      return "q5_k";
    case tensor_type::q6_k:
      return "q6_k";
    default:
      return nullptr;
  }
}

namespace {

std::string variant_of(const char* shader, const tensor& w) {
  const char* v = weight_variant(w.type);
  if (!v)
    throw std::runtime_error("vulkan: " + std::string(shader) + " has no shader for " +
                             std::string(tensor_type_name(w.type)) + " (" + w.name + ")");
  return std::string(shader) + "_" + v;
}

// Below this many tokens each weight row is read once per token (matrix-vector); above, tiles.
constexpr int64_t k_mat_vec_max_tokens = 4;

}  // namespace

void op_get_rows(device& d, const tensor& table, const tensor& ids, const tensor& out) {
  struct {
    uint32_t cols, n, row_bytes;
  } pc{uint32_t(table.ne[0]), uint32_t(ids.ne[0]), uint32_t(table.row_bytes())};
  const groups g = groups_for(ids.ne[0]);
  d.dispatch(variant_of("get_rows", table).c_str(), {buf(table), buf(ids), buf(out)}, &pc,
             sizeof(pc), g.x, g.y, 1);
}

void op_mul_mat(device& d, const tensor& w, const tensor& x, const tensor* bias,
                const tensor& out) {
  const int64_t n_tok = x.ne[1];
  struct {
    uint32_t n_in, n_out, n_tok, row_bytes, has_bias;
  } pc{uint32_t(w.ne[0]), uint32_t(w.ne[1]), uint32_t(n_tok), uint32_t(w.row_bytes()),
       bias && bias->present() ? 1u : 0u};
  const std::vector<const buffer*> bindings = {buf(w), buf(x), buf_or_null(bias), buf(out)};
  if (n_tok <= k_mat_vec_max_tokens) {
    std::string v = variant_of("mul_mat_vec", w);
    if (d.subgroup_arithmetic()) v += "_sg";
    const groups g = groups_for(w.ne[1]);
    d.dispatch(v.c_str(), bindings, &pc, sizeof(pc), g.x, g.y, uint32_t(n_tok));
  } else {
    d.dispatch(variant_of("mul_mat", w).c_str(), bindings, &pc, sizeof(pc),
               uint32_t((w.ne[1] + 31) / 32), uint32_t((n_tok + 31) / 32), 1);
  }
}

}  // namespace hearth::vk
