// Activations rounded to the type the reference's dot products take them in (the weight's
// vec_dot_type, engine/cpu/vec-dot.cpp), written back as F32 for the matrix shaders: F16 and BF16
// round each value; Q8_0 (Q8_0, Q4_0 and Q5_0 weights) and Q8_K (the K-quants) scale each block of
// 32 or 256 values to 8-bit integers. Q8_1 (Q5_1 weights) rounds as Q8_0 and writes each row's
// values followed by one s = d * Σq per block (F16), the column the matrix shaders meet a Q5_1
// block's minimum with (dequant.glsl MIN_APART), as engine/cpu/vec-dot-legacy.cpp does. The reference's outputs carry this rounding, and a product that
// skips it differs by enough to flip a router's choice between two nearly equal experts
// (mixture-of-experts models). ACT_TYPE picks the type; one invocation per value or block.
#version 450
#include "common.glsl"

#define ACT_F16 1
#define ACT_BF16 30
#define ACT_Q8_0 8
#define ACT_Q8_1 9
#define ACT_Q8_K 15

#if ACT_TYPE == ACT_Q8_0 || ACT_TYPE == ACT_Q8_1
#define QK 32u
#elif ACT_TYPE == ACT_Q8_K
#define QK 256u
#else
#define QK 1u
#endif

layout(local_size_x = BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Params {
  uint n_blocks;        // values / QK (every row a whole number of blocks)
  uint blocks_per_row;  // Q8_1: row length / QK
} p;

void main() {
  uint b = group_index() * BLOCK + gl_LocalInvocationID.x;
  if (b >= p.n_blocks) return;
  uint base = b * QK;
#if ACT_TYPE == ACT_F16
  dst[base] = round_f16(x[base]);
#elif ACT_TYPE == ACT_BF16
  // Round to nearest even; NaN stays NaN (engine/io/tensor-type.h fp32_to_bf16).
  uint u = floatBitsToUint(x[base]);
  uint h = (u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 64u) : ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  dst[base] = uintBitsToFloat(h << 16);
#elif ACT_TYPE == ACT_Q8_0
  // As q8_0_from_float: scale max|x| / 127 stored as F16, values rounded half away from zero.
  float amax = 0.0;
  for (uint j = 0u; j < QK; ++j) amax = max(amax, abs(x[base + j]));
  precise float d = amax / 127.0;
  precise float id = d != 0.0 ? 1.0 / d : 0.0;
  float dh = round_f16(d);
  for (uint j = 0u; j < QK; ++j) {
    precise float v = x[base + j] * id;
    dst[base + j] = dh * (sign(v) * floor(abs(v) + 0.5));
  }
#elif ACT_TYPE == ACT_Q8_1
  // As q8_1_from_float: Q8_0's rounding, and s from the integers and the unrounded scale. A row
  // of n values becomes n + n / 32: the values, then the s of each block.
  float amax = 0.0;
  for (uint j = 0u; j < QK; ++j) amax = max(amax, abs(x[base + j]));
  precise float d = amax / 127.0;
  precise float id = d != 0.0 ? 1.0 / d : 0.0;
  float dh = round_f16(d);
  uint r = b / p.blocks_per_row, k = b % p.blocks_per_row;
  uint row = r * p.blocks_per_row * (QK + 1u);
  int sum = 0;
  for (uint j = 0u; j < QK; ++j) {
    precise float v = x[base + j] * id;
    float q = sign(v) * floor(abs(v) + 0.5);
    sum += int(q);
    dst[row + k * QK + j] = dh * q;
  }
  precise float s = float(sum) * d;
  dst[row + p.blocks_per_row * QK + k] = round_f16(s);
#elif ACT_TYPE == ACT_Q8_K
  // As q8_k_from_float: the value of largest magnitude (the first of equals) sets the scale
  // -127 / max, values rounded half to even, at most 127; the scale stays F32.
  float amax = 0.0, mx = 0.0;
  for (uint j = 0u; j < QK; ++j) {
    float ax = abs(x[base + j]);
    if (ax > amax) {
      amax = ax;
      mx = x[base + j];
    }
  }
  if (amax == 0.0) {
    for (uint j = 0u; j < QK; ++j) dst[base + j] = 0.0;
    return;
  }
  precise float iscale = -127.0 / mx;
  precise float d = 1.0 / iscale;
  for (uint j = 0u; j < QK; ++j) {
    precise float v = iscale * x[base + j];
    dst[base + j] = d * min(127.0, roundEven(v));
  }
#else
#error "unknown ACT_TYPE"
#endif
}
