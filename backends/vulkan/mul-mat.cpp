// Matrix products and embedding-row lookup on stored weight types: mul_mat_vec.comp for few
// tokens and the tiled mul_mat.comp for many on GPUs, the tiled shader's row-per-lane layout for
// every token count on CPU devices; get_rows.comp; all dequantize with dequant.glsl. The expert
// product (mul_mat_id) is the same two shaders' MUL_MAT_ID variants.
#include <stdexcept>
#include <string>

#include "backends/vulkan/ops.h"
#include "backends/vulkan/spirv.h"

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
    case tensor_type::q5_0:
      return "q5_0";
    case tensor_type::q5_1:
      return "q5_1";
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

// The matrix-vector shader's variant for w on d and its workgroups for n_out rows (ROWS rows per
// workgroup).
struct mat_vec_plan {
  std::string variant;
  groups g;
};
mat_vec_plan mat_vec_for(device& d, const char* shader, const tensor& w, int64_t n_out);

std::string variant_of(const char* shader, const tensor& w) {
  const char* v = weight_variant(w.type);
  if (!v)
    throw std::runtime_error("vulkan: " + std::string(shader) + " has no shader for " +
                             std::string(tensor_type_name(w.type)) + " (" + w.name + ")");
  return std::string(shader) + "_" + v;
}

// On GPUs, up to this many tokens the matrix-vector shader reads each weight once for all of them
// (MAX_TOK of mul_mat_vec.comp); above, tiles.
constexpr int64_t k_mat_vec_max_tokens = 8;
// The expert product's matrix-vector path reads one expert matrix per output row (token × k), so
// it stops sooner: beyond, grouping rows by expert reads each chosen matrix once per 32 rows.
constexpr int64_t k_mat_vec_id_max_tokens = 4;
constexpr int64_t k_mat_vec_rows = 2;  // weight rows per workgroup (ROWS of mul_mat_vec.comp)

// The round_x.comp variant for weights of type t and the values per invocation, or nullptr for
// F32 weights, whose products take the activations as they are. with_sums: Q8_1, whose rows
// carry one s per block after their values (the columns a Q5_1 block's minimum meets).
struct rounding {
  const char* variant;
  int64_t block;
  bool with_sums = false;
};
rounding rounding_for(tensor_type t) {
  switch (t) {
    case tensor_type::f16:
      return {"round_x_f16", 1};
    case tensor_type::bf16:
      return {"round_x_bf16", 1};
    case tensor_type::q8_0:
    case tensor_type::q4_0:
    case tensor_type::q5_0:
      return {"round_x_q8_0", 32};
    case tensor_type::q5_1:
      return {"round_x_q8_1", 32, true};
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
      return {"round_x_q8_k", 256};
    default:
      return {nullptr, 1};
  }
}

mat_vec_plan mat_vec_for(device& d, const char* shader, const tensor& w, int64_t n_out) {
  std::string v = variant_of(shader, w);
  if (d.subgroup_arithmetic()) v += "_sg";
  return {v, groups_for((n_out + k_mat_vec_rows - 1) / k_mat_vec_rows)};
}

// The tiled shader's variant for w on d and its workgroups for n_out rows and n_tok tokens: in
// the row-per-lane layout 64 rows (LANE_ROWS per invocation) and TN_LANES (32) tokens per
// workgroup, else 32 × 32 tiles.
struct mat_plan {
  std::string variant;
  uint32_t x, y;
};
mat_plan mat_for(device& d, const char* shader, const tensor& w, int64_t n_out, int64_t n_tok) {
  const std::string v = variant_of(shader, w);
  if (d.lane_layouts()) {
    // Float rows of whole 32-value chunks read them as 16-byte words and their activations as
    // vec4s, 8 rows per invocation (mul_mat.comp WHOLE_CHUNKS), not a value at a time behind a
    // guard: on lavapipe F16 2048 x 2048 took 2.1 ms for one token and 13.7 for 32, not 8.3 and
    // 31.6 (F32: 5.4 and 18.9, not 8.7 and 32.8). The same sums in the same order, so the same
    // bits. The build compiles that variant for the float types (backends/vulkan/CMakeLists.txt).
    const std::string whole = v + "_lanes_whole";
    const bool take_whole = w.ne[0] % 32 == 0 && find_spirv(whole.c_str());
    return {take_whole ? whole : v + "_lanes", uint32_t((n_out + 63) / 64),
            uint32_t((n_tok + 31) / 32)};
  }
  return {v, uint32_t((n_out + 31) / 32), uint32_t((n_tok + 31) / 32)};
}

// x as the products with w take it: rounded into `rounded` where w's type rounds, else x.
const buffer* rounded_x(device& d, scratch& rounded, const tensor& w, const tensor& x) {
  const rounding r = rounding_for(w.type);
  if (!r.variant) return buf(x);
  const int64_t n = x.ne[0] * x.ne[1];
  const int64_t n_out = r.with_sums ? n + n / r.block : n;
  const buffer* out = rounded.at_least(d, VkDeviceSize(n_out * 4), "rounded activations");
  struct {
    uint32_t n_blocks, blocks_per_row;
  } pc{uint32_t(n / r.block), uint32_t(x.ne[0] / r.block)};
  const groups g = groups_for((pc.n_blocks + 63) / 64);  // BLOCK of round_x.comp
  d.dispatch(r.variant, {buf(x), out}, &pc, sizeof(pc), g.x, g.y, 1);
  return out;
}

}  // namespace

// Where the device has lane layouts (device::lane_layouts: CPU devices such as lavapipe), the
// tiled shader's row-per-lane layout (ROW_PER_LANE of mul_mat.comp; a workgroup is 8 or 16
// invocations) takes every token count, one token too:
// - a token's outputs are then the same bits whatever tokens share its product (one order of
//   additions, a chain over the row's chunks, as the CPU backend's tiles), so a sequence's text
//   does not depend on what else a node runs beside it; the matrix-vector shader sums strided
//   chunks and the tiles a chain, which differed by up to 6e-3 in F16 logits;
// - and it is faster there at every count (lavapipe runs a buffer load lane by lane even where
//   its address is uniform, which the matrix-vector shader's layout relied on): TinyLlama's
//   shapes cut to 2 layers, Q4_K_M, decoding 4.14 tokens/s against 3.10 (medians of 3, 2 threads),
//   and 5.87 against 4.69 once each invocation took 8 rows (prompts of 32: 81.3 against 25.0).
// On GPUs, few tokens take the matrix-vector shader, which spreads a row over many invocations.

// A table in row parts (buffer::next_part) takes a dispatch per part, each writing the rows whose
// ids fall in its part.
void op_get_rows(device& d, const tensor& table, const tensor& ids, const tensor& out) {
  const std::string variant = variant_of("get_rows", table);
  const groups g = groups_for(ids.ne[0]);
  for_each_row_part(table, [&](const buffer* part, int64_t first, int64_t n_rows) {
    struct {
      uint32_t cols, n, row_bytes, first_row, n_rows;
    } pc{uint32_t(table.ne[0]), uint32_t(ids.ne[0]), uint32_t(table.row_bytes()), uint32_t(first),
         uint32_t(n_rows)};
    d.dispatch(variant.c_str(), {part, buf(ids), buf(out)}, &pc, sizeof(pc), g.x, g.y, 1);
  });
}

// A weight in row parts takes a dispatch per part, each writing its rows' columns of the output
// (dst_first on): a row's sums are the same whichever part holds it.
void op_mul_mat(device& d, scratch& rounded, const tensor& w, const tensor& x, const tensor* bias,
                const tensor& out) {
  const int64_t n_tok = x.ne[1];
  const buffer* xb = rounded_x(d, rounded, w, x);
  for_each_row_part(w, [&](const buffer* part, int64_t first, int64_t n_out) {
    struct {
      uint32_t n_in, n_out, n_tok, row_bytes, has_bias, dst_cols, dst_first;
    } pc{uint32_t(w.ne[0]),
         uint32_t(n_out),
         uint32_t(n_tok),
         uint32_t(w.row_bytes()),
         bias && bias->present() ? 1u : 0u,
         uint32_t(w.ne[1]),
         uint32_t(first)};
    const std::vector<const buffer*> bindings = {part, xb, buf_or_null(bias), buf(out)};
    if (n_tok <= k_mat_vec_max_tokens && !d.lane_layouts()) {
      const mat_vec_plan m = mat_vec_for(d, "mul_mat_vec", w, n_out);
      d.dispatch(m.variant.c_str(), bindings, &pc, sizeof(pc), m.g.x, m.g.y, 1);
    } else {
      const mat_plan m = mat_for(d, "mul_mat", w, n_out, n_tok);
      d.dispatch(m.variant.c_str(), bindings, &pc, sizeof(pc), m.x, m.y, 1);
    }
  });
}

void op_mul_mat_id(device& d, scratch& rounded, scratch& group_rows, const tensor& w,
                   const tensor& x, const tensor& ids, const tensor& out) {
  const int64_t n_out = w.ne[1], n_expert = w.ne[2];
  const int64_t k = ids.ne[0], n_tok = ids.ne[1], n_rows = n_tok * k;
  const bool shared_x = x.ne[1] == n_tok;
  if (x.ne[0] != w.ne[0] || !(shared_x || x.ne[1] == n_rows) || out.ne[0] != n_out ||
      out.ne[1] != n_rows) {
    throw std::invalid_argument(std::string("vulkan: mul_mat_id shapes do not match (") + w.name +
                                ")");
  }
  struct {
    uint32_t n_in, n_out, n_rows, row_bytes, has_bias, k, shared_x, expert_bytes, n_expert;
  } pc{uint32_t(w.ne[0]),
       uint32_t(n_out),
       uint32_t(n_rows),
       uint32_t(w.row_bytes()),
       0u,
       uint32_t(k),
       shared_x ? 1u : 0u,
       uint32_t(w.row_bytes() * n_out),
       uint32_t(n_expert)};
  const buffer* xb = rounded_x(d, rounded, w, x);
  if (n_tok <= k_mat_vec_id_max_tokens && !d.lane_layouts()) {
    // Each output row reads its expert's matrix: at most n_tok * k matrices, all chosen ones.
    const mat_vec_plan m = mat_vec_for(d, "mul_mat_vec_id", w, n_out);
    d.dispatch(m.variant.c_str(), {buf(w), xb, nullptr, buf(out), buf(ids)}, &pc, sizeof(pc), m.g.x,
               m.g.y, uint32_t(n_rows));
    return;
  }
  // Counts, then one list of up to n_rows rows per expert (moe_group.comp's layout).
  const buffer* gb =
      group_rows.at_least(d, VkDeviceSize(4 * (n_expert + n_expert * n_rows)), "mul_mat_id groups");
  struct {
    uint32_t n_rows, n_expert;
  } gpc{uint32_t(n_rows), uint32_t(n_expert)};
  const groups gg = groups_for((n_expert + 63) / 64);  // BLOCK of moe_group.comp
  d.dispatch("moe_group", {buf(ids), gb}, &gpc, sizeof(gpc), gg.x, gg.y, 1);
  // An expert has at most n_tok rows when each token's ids are distinct, as the router's are;
  // the shader loops over further tiles when not.
  const mat_plan m = mat_for(d, "mul_mat_id", w, n_out, n_tok);
  d.dispatch(m.variant.c_str(), {buf(w), xb, nullptr, buf(out), gb}, &pc, sizeof(pc), m.x, m.y,
             uint32_t(n_expert));
}

}  // namespace hearth::vk
