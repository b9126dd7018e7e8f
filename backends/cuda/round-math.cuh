// Activations rounded as the CPU backend and the reference engine take them into a matrix
// product: each activation row is converted to the weight type's dot-product type (vec_dot_type,
// engine/cpu/vec-dot.cpp) before the product. The CUDA kernels multiply F32 activations, so the
// rounding is done in F32 space: each value becomes the float its converted form stands for, and
// the products then see the reference's activations. Skipping it differs by enough to flip a
// router's choice between two nearly equal experts in a mixture-of-experts model.
//
// Written once for the device and the host (as quant.cuh): round-math_test.cpp checks it bit for
// bit against the CPU's from_float and to_float on a machine without a GPU. Each value is
// computed with the CPU's expression in the CPU's order, with no FMA contraction on the device.
//
//   F16 weights          F16: round to nearest even (engine/io/tensor-type.cpp fp32_to_fp16)
//   BF16 weights         BF16: round to nearest even, NaN kept NaN
//   Q8_0, Q4_0, Q5_0     Q8_0: blocks of 32, d = max|x| / 127 stored as F16, q = roundf(x / d)
//   Q4_1, Q5_1           Q8_1: the same values as Q8_0 (its extra sum s, F16, is not mirrored)
//   Q4_K, Q5_K, Q6_K     Q8_K: blocks of 256, the value of largest magnitude (the first of equals)
//                        sets iscale = -127 / it, q = min(127, nearest even of iscale * x),
//                        d = 1 / iscale kept as F32
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cuda/hd.h"
#include "backends/cuda/quant.cuh"
#include "engine/io/tensor-type.h"

namespace hearth::cuda {

enum class activation_rounding { none, f16, bf16, q8_0, q8_k };

// The rounding a product with weights of type w applies to its activations.
constexpr activation_rounding activation_rounding_for(tensor_type w) {
  switch (w) {
    case tensor_type::f16:
      return activation_rounding::f16;
    case tensor_type::bf16:
      return activation_rounding::bf16;
    case tensor_type::q8_0:
    case tensor_type::q4_0:
    case tensor_type::q5_0:
    case tensor_type::q4_1:  // Q8_1
    case tensor_type::q5_1:  // Q8_1
      return activation_rounding::q8_0;
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
      return activation_rounding::q8_k;
    default:
      return activation_rounding::none;
  }
}

// Values per block of a rounding (a row is a whole number of blocks).
constexpr int activation_rounding_block(activation_rounding r) {
  return r == activation_rounding::q8_0 ? 32 : r == activation_rounding::q8_k ? 256 : 1;
}

namespace round_detail {

HEARTH_HD float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);  // correctly rounded whatever -prec-div says
#else
  return a / b;
#endif
}

HEARTH_HD float magnitude(float x) {
  return f32_bits_to_float(float_to_f32_bits(x) & 0x7fffffffu);
}

// Round half away from zero (C's roundf), as q8_0_from_float's std::round.
HEARTH_HD float round_away(float x) {
#ifdef __CUDA_ARCH__
  return roundf(x);
#else
  return std::round(x);
#endif
}

// ggml's nearest_int: round to nearest even through the mantissa of 1.5 * 2^23 (|x| < 2^22).
HEARTH_HD int32_t nearest_int(float x) {
  const float biased = quant_detail::add(x, 12582912.f);
  return int32_t(float_to_f32_bits(biased) & 0x007fffffu) - 0x00400000;
}

}  // namespace round_detail

// float -> IEEE half bits, round to nearest even: engine/io/tensor-type.cpp fp32_to_fp16, step
// for step (NaN becomes the quiet NaN 0x7e00 with the sign kept).
HEARTH_HD uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_to_f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {
    // Subnormal or zero: value / 2^-24 (exact), rounded to nearest even.
    const float scaled = quant_detail::mul(f32_bits_to_float(a), 16777216.0f);
    return uint16_t(sign | uint32_t(round_detail::nearest_int(scaled)));
  }
  uint32_t h = (a >> 13) - (112u << 10);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// Q8_0 (and Q8_1's values): the scale of a block of 32 whose largest magnitude is amax, as
// q8_0_from_float: d = amax / 127 stored as F16, values multiplied by 1 / d (unrounded d).
struct q8_0_scale {
  float id, dh;
};
HEARTH_HD q8_0_scale q8_0_scale_of(float amax) {
  using namespace round_detail;
  const float d = div(amax, 127.0f);
  return {d != 0.0f ? div(1.0f, d) : 0.0f, half_bits_to_float(float_to_half_bits(d))};
}
HEARTH_HD float q8_0_value(float x, const q8_0_scale& s) {
  // int8_t(q) in the CPU's block (so -0 becomes 0); dh * q is exact in F32 (11 + 7 bits).
  const int32_t q = int32_t(round_detail::round_away(quant_detail::mul(x, s.id)));
  return quant_detail::mul(s.dh, quant_detail::int_to_float(q));
}

// Q8_K: the scale of a block of 256 whose value of largest magnitude (the first of equals, in
// index order) is mx, as q8_k_from_float; amax == 0 is a block of zeros.
struct q8_k_scale {
  float iscale, d;
};
HEARTH_HD q8_k_scale q8_k_scale_of(float mx, float amax) {
  if (amax == 0.0f) return {0.0f, 0.0f};  // every value becomes +0
  const float iscale = round_detail::div(-127.0f, mx);
  return {iscale, round_detail::div(1.0f, iscale)};
}
HEARTH_HD int32_t q8_k_int(float x, const q8_k_scale& s) {
  const int32_t q = round_detail::nearest_int(quant_detail::mul(s.iscale, x));
  return q < 127 ? q : 127;
}
HEARTH_HD float q8_k_value(float x, const q8_k_scale& s) {
  return quant_detail::mul(s.d, quant_detail::int_to_float(q8_k_int(x, s)));
}

// One block of activations rounded: x and y hold activation_rounding_block(R) values; y may be x.
// (The device runs Q8_0 and Q8_K a warp per block, round-activations.cu, on the same functions.)
template <activation_rounding R>
HEARTH_HD void round_activation_block(const float* x, float* y) {
  using namespace round_detail;
  if constexpr (R == activation_rounding::f16) {
    y[0] = half_bits_to_float(float_to_half_bits(x[0]));
  } else if constexpr (R == activation_rounding::bf16) {
    y[0] = bf16_bits_to_float(float_to_bf16_bits(x[0]));
  } else if constexpr (R == activation_rounding::q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float ax = magnitude(x[j]);
      amax = amax < ax ? ax : amax;  // std::max(amax, ax)
    }
    const q8_0_scale s = q8_0_scale_of(amax);
    for (int j = 0; j < 32; ++j) y[j] = q8_0_value(x[j], s);
  } else if constexpr (R == activation_rounding::q8_k) {
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = magnitude(x[j]);
      if (ax > amax) {
        amax = ax;
        mx = x[j];
      }
    }
    const q8_k_scale s = q8_k_scale_of(mx, amax);
    for (int j = 0; j < 256; ++j) y[j] = q8_k_value(x[j], s);
  }
}

}  // namespace hearth::cuda
