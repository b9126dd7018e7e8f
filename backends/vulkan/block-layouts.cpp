// The shaders' weight type ids and block layouts (shaders/weight-types.glsl, which dequant.glsl
// reads them through) checked against engine/io/tensor-type.h when the backend is compiled: the
// GLSL file is plain #defines, included here as C++. Nothing here runs.
#include <cstddef>
#include <cstdint>

#include "backends/vulkan/shaders/weight-types.glsl"
#include "engine/io/tensor-type.h"

namespace hearth::vulkan {
namespace {

constexpr bool glsl_id_is(unsigned glsl_id, tensor_type t) {
  return glsl_id == unsigned(t);
}
static_assert(glsl_id_is(TYPE_F32, tensor_type::f32) && glsl_id_is(TYPE_F16, tensor_type::f16) &&
              glsl_id_is(TYPE_BF16, tensor_type::bf16) &&
              glsl_id_is(TYPE_Q8_0, tensor_type::q8_0) &&
              glsl_id_is(TYPE_Q4_0, tensor_type::q4_0) &&
              glsl_id_is(TYPE_Q5_0, tensor_type::q5_0) &&
              glsl_id_is(TYPE_Q5_1, tensor_type::q5_1) &&
              glsl_id_is(TYPE_Q4_K, tensor_type::q4_k) &&
              glsl_id_is(TYPE_Q5_K, tensor_type::q5_k) && glsl_id_is(TYPE_Q6_K, tensor_type::q6_k));

// The F16 scale d first, where the shaders read it at the block's start.
static_assert(offsetof(block_q8_0, d) == 0 && offsetof(block_q4_0, d) == 0 &&
              offsetof(block_q5_0, d) == 0 && offsetof(block_q5_1, d) == 0 &&
              offsetof(block_q4_k, d) == 0 && offsetof(block_q5_k, d) == 0);

static_assert(Q8_0_BYTES == sizeof(block_q8_0) && Q8_0_QS == offsetof(block_q8_0, qs));
static_assert(Q4_0_BYTES == sizeof(block_q4_0) && Q4_0_QS == offsetof(block_q4_0, qs));
static_assert(Q5_0_BYTES == sizeof(block_q5_0) && Q5_0_QH == offsetof(block_q5_0, qh) &&
              Q5_0_QH + Q5_QS_AFTER_QH == offsetof(block_q5_0, qs));
static_assert(Q5_1_BYTES == sizeof(block_q5_1) && Q5_1_M == offsetof(block_q5_1, m) &&
              Q5_1_QH == offsetof(block_q5_1, qh) &&
              Q5_1_QH + Q5_QS_AFTER_QH == offsetof(block_q5_1, qs));
static_assert(sizeof(block_q5_0::qh) == Q5_QS_AFTER_QH && sizeof(block_q5_1::qh) == Q5_QS_AFTER_QH);

// Q4_K/Q5_K: k_scale_min reads d, dmin and the 12 scale bytes as the block's first 16-byte word,
// and the quants as whole 16-byte words of blocks that start at multiples of 16.
template <class B>
constexpr bool k_header_is_16_bytes = offsetof(B, dmin) == 2 && offsetof(B, scales) == 4 &&
                                      sizeof(B::scales) == 12;
static_assert(k_header_is_16_bytes<block_q4_k> && k_header_is_16_bytes<block_q5_k>);
static_assert(Q4_K_BYTES == sizeof(block_q4_k) && Q4_K_QS == offsetof(block_q4_k, qs));
static_assert(Q5_K_BYTES == sizeof(block_q5_k) && Q5_K_QH == offsetof(block_q5_k, qh) &&
              Q5_K_QS == offsetof(block_q5_k, qs));
static_assert(Q4_K_BYTES % 16 == 0 && Q4_K_QS % 16 == 0 && Q5_K_BYTES % 16 == 0 &&
              Q5_K_QH % 16 == 0 && Q5_K_QS % 16 == 0);

static_assert(Q6_K_BYTES == sizeof(block_q6_k) && Q6_K_QL == offsetof(block_q6_k, ql) &&
              Q6_K_QH == offsetof(block_q6_k, qh) && Q6_K_SCALES == offsetof(block_q6_k, scales) &&
              Q6_K_D == offsetof(block_q6_k, d));

}  // namespace
}  // namespace hearth::vulkan
