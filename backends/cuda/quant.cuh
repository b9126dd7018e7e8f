// The weight types' dequantization as the CUDA kernels run it (get_rows, mul_mat_vec,
// dequantize_rows), written once for the device and the host: compiled by g++ it is plain C++,
// so quant_test.cpp checks it bit for bit against the CPU backend's to_float (kernels_for: for
// block types the type's own, engine/io/dequantize.cpp) on a machine without a GPU. Each value is
// computed with the CPU's expression in the CPU's order, and on the device with no FMA contraction
// (__fmul_rn,
// __fadd_rn), so it is the same float. Block layouts: the structs of engine/io/tensor-type.h,
// whose sizes and field offsets the decoders below read (sizeof, offsetof), so a layout is written
// once and a decoder that assumes more of it than that says so in a static_assert.
//
// The unit is a group of 8 consecutive values of a row (group i: values 8i .. 8i + 7), so that
// a lane decodes a block's scale once for 8 values and 32 lanes read contiguous bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backends/cuda/hd.h"
#include "engine/io/tensor-type.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif

// Fully unrolled loops keep per-value arrays in registers on the device.
#ifdef __CUDA_ARCH__
#define HEARTH_UNROLL _Pragma("unroll")
#else
#define HEARTH_UNROLL
#endif

namespace hearth::cuda {

// --- scalar conversions -------------------------------------------------------------------

// IEEE half -> float, exact for every input (subnormals, infinities, NaN payloads).
HEARTH_HD float half_bits_to_float(uint32_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float (a power-of-two scale of a small integer).
    const float f = float(mant) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
#endif
}

HEARTH_HD float f32_bits_to_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// The bits of a float (f32_bits_to_float's inverse).
HEARTH_HD uint32_t float_to_f32_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

HEARTH_HD float bf16_bits_to_float(uint32_t h) {
  return f32_bits_to_float(h << 16);
}

// float -> bfloat16, round to nearest even, NaN kept NaN: engine/io/tensor-type.h fp32_to_bf16.
HEARTH_HD uint16_t float_to_bf16_bits(float f) {
#ifdef __CUDA_ARCH__
  const uint32_t u = __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);
  return uint16_t((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

namespace quant_detail {

// float(q) for |q| < 2^22. On the device through the mantissa of 1.5 * 2^23 (an integer add
// and an exact float subtraction), which is cheaper than I2F.
HEARTH_HD float int_to_float(int32_t q) {
#ifdef __CUDA_ARCH__
  return __int_as_float(0x4b400000 + q) - 12582912.0f;
#else
  return float(q);
#endif
}

// Products and sums rounded one at a time, as the CPU's portable code computes them: nvcc
// would otherwise contract a * b + c into one FMA with a different rounding.
HEARTH_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HEARTH_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HEARTH_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// Loads of weight bytes. The suffix is the alignment the address has (weight_traits::align
// says which the row start must have); on the device they go through the read-only cache.
HEARTH_HD uint32_t load_u8(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}
HEARTH_HD uint32_t load_u16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
// Four bytes at a 2-aligned address. On the device from the aligned words that hold them (an
// aligned word holding a byte of the weights lies in the same page, so reading all of it is
// safe), which takes fewer and wider loads than 16-bit halves.
HEARTH_HD uint32_t load_u32_a2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const auto* a =
      reinterpret_cast<const unsigned int*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(3));
  const uint32_t sh = (reinterpret_cast<uintptr_t>(p) & 2) * 8;
  // The second word only when p is not 4-aligned; else the first again (no branch).
  const uint32_t w0 = __ldg(a), w1 = __ldg(a + (sh ? 1 : 0));
  return __funnelshift_r(w0, w1, sh);
#else
  return load_u16(p) | (load_u16(p + 2) << 16);
#endif
}
HEARTH_HD uint32_t load_u32_a4(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
struct u32x2 {
  uint32_t lo, hi;
};
HEARTH_HD u32x2 load_u32x2_a2(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const auto* a =
      reinterpret_cast<const unsigned int*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(3));
  const uint32_t sh = (reinterpret_cast<uintptr_t>(p) & 2) * 8;
  const uint32_t w0 = __ldg(a), w1 = __ldg(a + 1), w2 = __ldg(a + (sh ? 2 : 1));
  return {__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh)};
#else
  return {load_u32_a2(p), load_u32_a2(p + 4)};
#endif
}
// 32 bytes at a 2-aligned address as 8 words: 9 aligned words funnel-shifted on the device (the
// ninth read only when p is not 4-aligned).
HEARTH_HD void load_u32x8_a2(const uint8_t* p, uint32_t (&v)[8]) {
#ifdef __CUDA_ARCH__
  const auto* a =
      reinterpret_cast<const unsigned int*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(3));
  const uint32_t sh = (reinterpret_cast<uintptr_t>(p) & 2) * 8;
  uint32_t w[9];
  HEARTH_UNROLL
  for (int k = 0; k < 8; ++k) w[k] = __ldg(a + k);
  w[8] = __ldg(a + (sh ? 8 : 7));
  HEARTH_UNROLL
  for (int k = 0; k < 8; ++k) v[k] = __funnelshift_r(w[k], w[k + 1], sh);
#else
  std::memcpy(v, p, 32);
#endif
}
HEARTH_HD u32x2 load_u32x2_a4(const uint8_t* p) {
  return {load_u32_a4(p), load_u32_a4(p + 4)};
}
HEARTH_HD u32x2 load_u32x2_a8(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
  return {v.x, v.y};
#else
  return load_u32x2_a4(p);
#endif
}
struct u32x4 {
  uint32_t w[4];
};
HEARTH_HD u32x4 load_u32x4_a16(const uint8_t* p) {
#ifdef __CUDA_ARCH__
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  return {{v.x, v.y, v.z, v.w}};
#else
  u32x4 v;
  std::memcpy(v.w, p, 16);
  return v;
#endif
}

// Byte k (0..3) of a little-endian word.
HEARTH_HD uint32_t byte_of(uint32_t w, int k) {
  return (w >> (8 * k)) & 0xffu;
}

// Sub-block s (of 32 values) of a Q4_K/Q5_K block: its scale and min as the CPU computes them
// (the 6-bit packing is described at block_q4_k; engine/io/tensor-type.h k_scales_mins).
// hdr: the block's first 16 bytes (d, dmin, the 12 scale bytes) as 4 words.
template <class B>
constexpr bool k_header_is_16_bytes = offsetof(B, d) == 0 && offsetof(B, dmin) == 2 &&
                                      offsetof(B, scales) == 4 && sizeof(B::scales) == 12;
static_assert(k_header_is_16_bytes<block_q4_k> && k_header_is_16_bytes<block_q5_k>);
struct k_sub_bits {
  uint32_t sc, mn;  // the 6-bit scale[s] and min[s]
};
HEARTH_HD k_sub_bits k_scale_min_bits(const u32x4& hdr, int s) {
  const int k = s & 3;
  const uint32_t a = byte_of(hdr.w[1], k);  // scales[s & 3]
  const uint32_t b = byte_of(hdr.w[2], k);  // scales[4 + (s & 3)]
  const uint32_t c = byte_of(hdr.w[3], k);  // scales[8 + (s & 3)]
  // Selects, not branches: lanes of a warp decode different sub-blocks.
  const bool low = s < 4;
  return {low ? a & 63 : (c & 0xf) | ((a >> 6) << 4), low ? b & 63 : (c >> 4) | ((b >> 6) << 4)};
}
struct k_sub_scale {
  float d1, m1;  // d * scale[s], dmin * min[s]
};
HEARTH_HD k_sub_scale k_scale_min(const u32x4& hdr, int s) {
  const float d = half_bits_to_float(hdr.w[0] & 0xffffu), dmin = half_bits_to_float(hdr.w[0] >> 16);
  const k_sub_bits q = k_scale_min_bits(hdr, s);
  return {mul(d, int_to_float(int32_t(q.sc))), mul(dmin, int_to_float(int32_t(q.mn)))};
}

}  // namespace quant_detail

// --- the weight types -----------------------------------------------------------------------

// block_elems values take block_bytes bytes; group8(row, i, v) writes values 8i .. 8i + 7 of a
// row into v, value(row, j) value j. On the device, a quantized row must start `align`-aligned:
// a weight table's base is (cudaMalloc gives 256; GGUF data offsets are multiples of 32), and
// every row starts a whole number of blocks later, which keeps that alignment. For F32/F16/BF16,
// group8 reads 16 bytes at a time and needs 16-aligned rows of a multiple of 8 values (the
// kernels fall back to value(), which needs only the element's own alignment).
template <tensor_type T>
struct weight_traits;

template <>
struct weight_traits<tensor_type::f32> {
  static constexpr int block_elems = 1, block_bytes = 4, align = 16;
  HEARTH_HD static void group8(const uint8_t* row, int64_t i, float v[8]) {
    const uint8_t* p = row + 32 * i;
    const quant_detail::u32x4 a = quant_detail::load_u32x4_a16(p);
    const quant_detail::u32x4 b = quant_detail::load_u32x4_a16(p + 16);
    HEARTH_UNROLL
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[k] = f32_bits_to_float(a.w[k]);
      v[4 + k] = f32_bits_to_float(b.w[k]);
    }
  }
  HEARTH_HD static float value(const uint8_t* row, int64_t j) {
    return f32_bits_to_float(quant_detail::load_u32_a4(row + 4 * j));
  }
};

template <>
struct weight_traits<tensor_type::f16> {
  static constexpr int block_elems = 1, block_bytes = 2, align = 16;
  HEARTH_HD static void group8(const uint8_t* row, int64_t i, float v[8]) {
    const quant_detail::u32x4 a = quant_detail::load_u32x4_a16(row + 16 * i);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = half_bits_to_float(a.w[k] & 0xffffu);
      v[2 * k + 1] = half_bits_to_float(a.w[k] >> 16);
    }
  }
  HEARTH_HD static float value(const uint8_t* row, int64_t j) {
    return half_bits_to_float(quant_detail::load_u16(row + 2 * j));
  }
};

template <>
struct weight_traits<tensor_type::bf16> {
  static constexpr int block_elems = 1, block_bytes = 2, align = 16;
  HEARTH_HD static void group8(const uint8_t* row, int64_t i, float v[8]) {
    const quant_detail::u32x4 a = quant_detail::load_u32x4_a16(row + 16 * i);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = bf16_bits_to_float(a.w[k] & 0xffffu);
      v[2 * k + 1] = bf16_bits_to_float(a.w[k] >> 16);
    }
  }
  HEARTH_HD static float value(const uint8_t* row, int64_t j) {
    return bf16_bits_to_float(quant_detail::load_u16(row + 2 * j));
  }
};

// The quantized types: block(b, g, v) decodes group g of one block; group8 and value follow.
template <class B>
struct block_weight {
  HEARTH_HD static void group8(const uint8_t* row, int64_t i, float v[8]) {
    constexpr uint64_t groups = B::block_elems / 8;  // unsigned: a shift and a mask
    B::block(row + uint64_t(i) / groups * B::block_bytes, int(uint64_t(i) % groups), v);
  }
  HEARTH_HD static float value(const uint8_t* row, int64_t j) {
    float v[8];
    group8(row, j / 8, v);
    const int k = int(j % 8);
    float out = v[0];
    HEARTH_UNROLL
    for (int n = 1; n < 8; ++n) out = n == k ? v[n] : out;  // selects: no local memory
    return out;
  }
};

template <>
struct weight_traits<tensor_type::q8_0> : block_weight<weight_traits<tensor_type::q8_0>> {
  static constexpr int block_elems = k_q8_0_block, block_bytes = int(sizeof(block_q8_0)), align = 2;
  // x = d * q: 32 signed bytes qs.
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const float d = half_bits_to_float(load_u16(b + offsetof(block_q8_0, d)));
    const u32x2 q = load_u32x2_a2(b + offsetof(block_q8_0, qs) + 8 * g);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[k] = mul(d, int_to_float(int32_t(q.lo << (24 - 8 * k)) >> 24));
      v[4 + k] = mul(d, int_to_float(int32_t(q.hi << (24 - 8 * k)) >> 24));
    }
  }
};

template <>
struct weight_traits<tensor_type::q4_0> : block_weight<weight_traits<tensor_type::q4_0>> {
  static constexpr int block_elems = k_q4_0_block, block_bytes = int(sizeof(block_q4_0)), align = 2;
  // x = (q - 8) * d; values 0..15 the low nibbles of qs, 16..31 the high ones.
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const float d = half_bits_to_float(load_u16(b + offsetof(block_q4_0, d)));
    const u32x2 q = load_u32x2_a2(b + offsetof(block_q4_0, qs) + 8 * (g & 1));
    const int shift = 4 * (g >> 1);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[k] = mul(int_to_float(int32_t((q.lo >> (8 * k + shift)) & 0xf) - 8), d);
      v[4 + k] = mul(int_to_float(int32_t((q.hi >> (8 * k + shift)) & 0xf) - 8), d);
    }
  }
};

template <>
struct weight_traits<tensor_type::q4_1> : block_weight<weight_traits<tensor_type::q4_1>> {
  static constexpr int block_elems = k_q4_1_block, block_bytes = int(sizeof(block_q4_1)), align = 4;
  // x = q * d + m: d and m read as one word, qs nibbles as Q4_0.
  static_assert(offsetof(block_q4_1, d) == 0 && offsetof(block_q4_1, m) == 2);
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const uint32_t dm = load_u32_a4(b);
    const float d = half_bits_to_float(dm & 0xffffu), m = half_bits_to_float(dm >> 16);
    const u32x2 q = load_u32x2_a4(b + offsetof(block_q4_1, qs) + 8 * (g & 1));
    const int shift = 4 * (g >> 1);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[k] = add(mul(int_to_float(int32_t((q.lo >> (8 * k + shift)) & 0xf)), d), m);
      v[4 + k] = add(mul(int_to_float(int32_t((q.hi >> (8 * k + shift)) & 0xf)), d), m);
    }
  }
};

template <>
struct weight_traits<tensor_type::q5_0> : block_weight<weight_traits<tensor_type::q5_0>> {
  static constexpr int block_elems = k_q5_0_block, block_bytes = int(sizeof(block_q5_0)), align = 2;
  // x = (q - 16) * d: qh bit j is value j's fifth bit, qs as Q4_0.
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const float d = half_bits_to_float(load_u16(b + offsetof(block_q5_0, d)));
    const uint32_t qh = load_u32_a2(b + offsetof(block_q5_0, qh)) >> (8 * g);  // bit k: 8g + k
    const u32x2 q = load_u32x2_a2(b + offsetof(block_q5_0, qs) + 8 * (g & 1));
    const int shift = 4 * (g >> 1);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo = ((q.lo >> (8 * k + shift)) & 0xf) | (((qh >> k) & 1) << 4);
      const uint32_t hi = ((q.hi >> (8 * k + shift)) & 0xf) | (((qh >> (4 + k)) & 1) << 4);
      v[k] = mul(int_to_float(int32_t(lo) - 16), d);
      v[4 + k] = mul(int_to_float(int32_t(hi) - 16), d);
    }
  }
};

template <>
struct weight_traits<tensor_type::q5_1> : block_weight<weight_traits<tensor_type::q5_1>> {
  static constexpr int block_elems = k_q5_1_block, block_bytes = int(sizeof(block_q5_1)), align = 4;
  // x = q * d + m: d and m read as one word, qh and qs as Q5_0.
  static_assert(offsetof(block_q5_1, d) == 0 && offsetof(block_q5_1, m) == 2);
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const uint32_t dm = load_u32_a4(b);
    const float d = half_bits_to_float(dm & 0xffffu), m = half_bits_to_float(dm >> 16);
    const uint32_t qh = load_u32_a4(b + offsetof(block_q5_1, qh)) >> (8 * g);
    const u32x2 q = load_u32x2_a4(b + offsetof(block_q5_1, qs) + 8 * (g & 1));
    const int shift = 4 * (g >> 1);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo = ((q.lo >> (8 * k + shift)) & 0xf) | (((qh >> k) & 1) << 4);
      const uint32_t hi = ((q.hi >> (8 * k + shift)) & 0xf) | (((qh >> (4 + k)) & 1) << 4);
      v[k] = add(mul(int_to_float(int32_t(lo)), d), m);
      v[4 + k] = add(mul(int_to_float(int32_t(hi)), d), m);
    }
  }
};

// Q4_K/Q5_K group g: 64-value chunk c = g / 8, its low (half 0) or high (half 1) nibbles, bytes
// l0 .. l0 + 7 of the chunk's 32; sub-block 2c + half.
template <>
struct weight_traits<tensor_type::q4_k> : block_weight<weight_traits<tensor_type::q4_k>> {
  static constexpr int block_elems = k_qk_k, block_bytes = int(sizeof(block_q4_k)), align = 16;
  // The 16-byte header (d, dmin, scales), then qs.
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const int c = g >> 3, half = (g >> 2) & 1, l0 = 8 * (g & 3);
    const k_sub_scale s = k_scale_min(load_u32x4_a16(b), 2 * c + half);
    const u32x2 q = load_u32x2_a8(b + offsetof(block_q4_k, qs) + 32 * c + l0);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      v[k] = sub(mul(s.d1, int_to_float(int32_t((q.lo >> (8 * k + 4 * half)) & 0xf))), s.m1);
      v[4 + k] = sub(mul(s.d1, int_to_float(int32_t((q.hi >> (8 * k + 4 * half)) & 0xf))), s.m1);
    }
  }
};

template <>
struct weight_traits<tensor_type::q5_k> : block_weight<weight_traits<tensor_type::q5_k>> {
  static constexpr int block_elems = k_qk_k, block_bytes = int(sizeof(block_q5_k)), align = 16;
  // The 16-byte header (d, dmin, scales), qh (value l of chunk c, half h: bit 2c + h of qh[l]),
  // qs.
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const int c = g >> 3, half = (g >> 2) & 1, l0 = 8 * (g & 3);
    const k_sub_scale s = k_scale_min(load_u32x4_a16(b), 2 * c + half);
    const u32x2 q = load_u32x2_a8(b + offsetof(block_q5_k, qs) + 32 * c + l0);
    const u32x2 h = load_u32x2_a8(b + offsetof(block_q5_k, qh) + l0);
    const int hb = 2 * c + half;
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo =
          ((q.lo >> (8 * k + 4 * half)) & 0xf) | (((h.lo >> (8 * k + hb)) & 1) << 4);
      const uint32_t hi =
          ((q.hi >> (8 * k + 4 * half)) & 0xf) | (((h.hi >> (8 * k + hb)) & 1) << 4);
      v[k] = sub(mul(s.d1, int_to_float(int32_t(lo))), s.m1);
      v[4 + k] = sub(mul(s.d1, int_to_float(int32_t(hi))), s.m1);
    }
  }
};

template <>
struct weight_traits<tensor_type::q6_k> : block_weight<weight_traits<tensor_type::q6_k>> {
  static constexpr int block_elems = k_qk_k, block_bytes = int(sizeof(block_q6_k)), align = 2;
  // Group g: half h = g / 16 of 128 values, quarter gq (value 32 gq + l of the half),
  // l0 = 8 (g % 4).
  HEARTH_HD static void block(const uint8_t* b, int g, float v[8]) {
    using namespace quant_detail;
    const int h = g >> 4, gq = (g >> 2) & 3, l0 = 8 * (g & 3);
    const float d = half_bits_to_float(load_u16(b + offsetof(block_q6_k, d)));
    const int32_t sc =
        int32_t(load_u8(b + offsetof(block_q6_k, scales) + 8 * h + (l0 >> 4) + 2 * gq) << 24) >> 24;
    const float ds = mul(d, int_to_float(sc));
    const u32x2 ql = load_u32x2_a2(b + offsetof(block_q6_k, ql) + 64 * h + 32 * (gq & 1) + l0);
    const u32x2 qh = load_u32x2_a2(b + offsetof(block_q6_k, qh) + 32 * h + l0);
    const int ls = 4 * (gq >> 1), hs = 2 * gq;
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo = ((ql.lo >> (8 * k + ls)) & 0xf) | (((qh.lo >> (8 * k + hs)) & 3) << 4);
      const uint32_t hi = ((ql.hi >> (8 * k + ls)) & 0xf) | (((qh.hi >> (8 * k + hs)) & 3) << 4);
      v[k] = mul(ds, int_to_float(int32_t(lo) - 32));
      v[4 + k] = mul(ds, int_to_float(int32_t(hi) - 32));
    }
  }
};

// --- dispatch -------------------------------------------------------------------------------

template <tensor_type T>
using weight_type_tag = std::integral_constant<tensor_type, T>;

// The weight types the kernels take, in one list: f(weight_type_tag<T>{}) for T == t, or
// std::invalid_argument naming `what` when t is not one of them.
template <class F>
void dispatch_weight_type(tensor_type t, const char* what, F&& f) {
  switch (t) {
    case tensor_type::f32:
      f(weight_type_tag<tensor_type::f32>{});
      return;
    case tensor_type::f16:
      f(weight_type_tag<tensor_type::f16>{});
      return;
    case tensor_type::bf16:
      f(weight_type_tag<tensor_type::bf16>{});
      return;
    case tensor_type::q8_0:
      f(weight_type_tag<tensor_type::q8_0>{});
      return;
    case tensor_type::q4_0:
      f(weight_type_tag<tensor_type::q4_0>{});
      return;
    case tensor_type::q4_1:
      f(weight_type_tag<tensor_type::q4_1>{});
      return;
    case tensor_type::q5_0:
      f(weight_type_tag<tensor_type::q5_0>{});
      return;
    case tensor_type::q5_1:
      f(weight_type_tag<tensor_type::q5_1>{});
      return;
    case tensor_type::q4_k:
      f(weight_type_tag<tensor_type::q4_k>{});
      return;
    case tensor_type::q5_k:
      f(weight_type_tag<tensor_type::q5_k>{});
      return;
    case tensor_type::q6_k:
      f(weight_type_tag<tensor_type::q6_k>{});
      return;
    default:
      break;
  }
  throw std::invalid_argument(std::string(what) + ": no CUDA kernels for weight type " +
                              std::string(tensor_type_name(t)));
}

// Rows of weight type T as the row-reading kernels (dequantize_rows, get_rows) take them: the
// bytes of one row of `n` values, and whether the kernels may read 8 values per thread (`grouped`:
// whole groups of 8, the rows `align`-aligned and the output 16-aligned). Throws
// std::invalid_argument, naming `what`, when a row is not whole blocks or `first` (the first row
// read; `rows` says what it is) is not aligned for T's loads.
struct weight_rows {
  int64_t row_bytes = 0;
  bool grouped = false;
};
template <tensor_type T>
weight_rows weight_rows_for(int64_t n, const void* first, const float* out, const char* what,
                            const char* rows) {
  using traits = weight_traits<T>;
  if (n % traits::block_elems != 0)
    throw std::invalid_argument(std::string(what) + ": rows are not whole blocks");
  weight_rows r;
  r.row_bytes = n / traits::block_elems * traits::block_bytes;
  const auto base = reinterpret_cast<uintptr_t>(first);
  if (traits::block_elems > 1 && base % traits::align != 0)
    throw std::invalid_argument(std::string(what) + ": misaligned " + rows);
  r.grouped = n % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
              base % traits::align == 0 && r.row_bytes % traits::align == 0;
  return r;
}

}  // namespace hearth::cuda
