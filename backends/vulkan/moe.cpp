// The mixture-of-experts router and the weighted sum of the chosen experts' outputs
// (moe_route.comp, moe_combine.comp); the expert product between them is in mul-mat.cpp.
#include "backends/vulkan/ops.h"

namespace hearth::vk {

void op_moe_route(device& d, const tensor& logits, bool normalize, const tensor& ids,
                  const tensor& weights) {
  struct {
    uint32_t n_expert, n_tok, k, normalize;
  } pc{uint32_t(logits.ne[0]), uint32_t(logits.ne[1]), uint32_t(ids.ne[0]), normalize ? 1u : 0u};
  const groups g = groups_for((logits.ne[1] + 63) / 64);  // BLOCK of moe_route.comp, one token each
  d.dispatch("moe_route", {buf(logits), buf(ids), buf(weights)}, &pc, sizeof(pc), g.x, g.y, 1);
}

void op_moe_combine(device& d, const tensor& x, const tensor& weights, const tensor& out) {
  struct {
    uint32_t cols, n_tok, k;
  } pc{uint32_t(x.ne[0]), uint32_t(weights.ne[1]), uint32_t(weights.ne[0])};
  const groups g = groups_for((out.ne[0] * weights.ne[1] + 63) / 64);  // BLOCK of moe_combine.comp
  d.dispatch("moe_combine", {buf(x), buf(weights), buf(out)}, &pc, sizeof(pc), g.x, g.y, 1);
}

}  // namespace hearth::vk
