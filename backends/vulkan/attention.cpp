#include <stdexcept>
#include <string>
#include <vector>

#include "backends/vulkan/ops.h"
#include "backends/vulkan/spirv.h"

namespace hearth::vk {

void op_attention(device& d, const tensor& q, const tensor& k_cache, const tensor& v_cache,
                  const tensor& tok_seq, const tensor& tok_pos, const tensor& cell_seq,
                  const tensor& cell_pos, int32_t n_cells, const attention_params& p,
                  const tensor& out) {
  if (k_cache.type != v_cache.type ||
      (k_cache.type != tensor_type::f16 && k_cache.type != tensor_type::f32))
    throw std::runtime_error("vulkan: attention needs K and V caches both F16 or both F32");
  if (p.head_dim_k > 256 || p.head_dim_v > 256)
    throw std::runtime_error("vulkan: attention supports head sizes up to 256, not " +
                             std::to_string(std::max(p.head_dim_k, p.head_dim_v)));
  struct {
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v, k_row, v_row, q_row, out_row, n_cells;
    int32_t window;
    float scale, softcap;
    uint32_t n_tok;
  } pc{uint32_t(p.n_head),
       uint32_t(p.n_head_kv),
       uint32_t(p.head_dim_k),
       uint32_t(p.head_dim_v),
       uint32_t(k_cache.ne[0]),
       uint32_t(v_cache.ne[0]),
       uint32_t(q.ne[0]),
       uint32_t(out.ne[0]),
       uint32_t(n_cells),
       p.window,
       p.scale,
       p.softcap,
       uint32_t(q.ne[1])};
  std::string variant = k_cache.type == tensor_type::f16 ? "attention_f16" : "attention_f32";
  const std::vector<const buffer*> bindings = {buf(q),        buf(k_cache), buf(v_cache),
                                               buf(tok_seq),  buf(tok_pos), buf(cell_seq),
                                               buf(cell_pos), buf(out)};
  // The lane layout (attention.comp LANES) runs where the device has lane layouts, in a variant
  // per head size (backends/vulkan/CMakeLists.txt lists them); other sizes take the GPU layout. On
  // lavapipe (2 threads, TinyLlama's 32 heads over 4 KV heads, F16 cache) it took 32 tokens over
  // 512 cells from 250 ms to 28, one token over 512 cells from 8.5-9.3 ms to 1.3, and a
  // 512-token prompt through TinyLlama's shapes cut to 2 layers (Q4_K_M) from 44.6 and 43.6
  // tokens/s to 96.3 and 92.9 (old and new module alternating).
  const std::string lanes = variant + "_lanes_" + std::to_string(p.head_dim_k);
  if (d.lane_layouts() && p.head_dim_k == p.head_dim_v && find_spirv(lanes.c_str())) {
    const groups g = groups_for((int64_t(p.n_head) * q.ne[1] + 7) / 8);  // BLOCK of LANES: 8
    d.dispatch(lanes.c_str(), bindings, &pc, sizeof(pc), g.x, g.y, 1);
    return;
  }
  if (d.subgroup_arithmetic()) variant += "_sg";
  d.dispatch(variant.c_str(), bindings, &pc, sizeof(pc), uint32_t(p.n_head), uint32_t(q.ne[1]), 1);
}

}  // namespace hearth::vk
