// The integer decoding product's arithmetic (mul-mat-vec-q8k.cu), written once for the device and
// the host: mmvq-math_test.cpp checks it against the CPU's Q4_K × Q8_K and Q6_K × Q8_K dot
// products, block for block, bit for bit.
//
// A K-quant block of 256 weights against a block of activations rounded as the CPU rounds them
// (Q8_K: 256 int8 values, an F32 scale, and the sums of each 16) is taken by 8 lanes, lane j the
// 32 values of sub-block j: products of bytes summed in 32-bit integers, 4 per dp4a, times the
// block's small integer scales. Summed over the 8 lanes these are the CPU's integers exactly
// (integers: any order gives them), and the block's term is the CPU's float expression of them,
// so every block adds what it adds on the CPU; only the order the blocks' terms are summed in
// differs. The float kernel (mul-mat-vec.cu) instead dequantizes each weight to F32 and takes
// about ten instructions a weight where this takes about two.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/quant.cuh"

namespace hearth::cuda {

// c + Σ_k int8(a byte k) · int8(b byte k).
HEARTH_HD int32_t dot4_i8(uint32_t a, uint32_t b, int32_t c) {
#ifdef __CUDA_ARCH__
  return __dp4a(int(a), int(b), c);
#else
  for (int k = 0; k < 4; ++k) c += int32_t(int8_t(a >> (8 * k))) * int32_t(int8_t(b >> (8 * k)));
  return c;
#endif
}

// float(i), rounded to nearest as the CPU's float(int32_t).
HEARTH_HD float int32_to_float_rn(int32_t i) {
#ifdef __CUDA_ARCH__
  return __int2float_rn(i);
#else
  return float(i);
#endif
}

// Σ of products of bytes over words [K0, K1) (weights as non-negative bytes, signed activations).
template <int K0, int K1>
HEARTH_HD int32_t dot_i8(const uint32_t (&q)[8], const uint32_t (&x)[8]) {
  int32_t s = 0;
  HEARTH_UNROLL
  for (int k = K0; k < K1; ++k) s = dot4_i8(q[k], x[k], s);
  return s;
}

// One lane's share of a block's integers: the CPU's sumi and summ (summ for the types with mins).
struct k_lane_sums {
  int32_t sumi, summ;
};

// What a lane holds of one row's block (loaded once for every token), what it adds to the
// block's integers for one token's activations x (its sub-block's 32 int8, four to a word) whose
// halves sum to s0 and s1, and the block's term from the summed integers.
template <tensor_type T>
struct q8k_lane;

// Q4_K (engine/cpu/vec-dot-k.cpp dot_q45_k_q8_k_generic): sub-block j is the low (j even) or high
// nibbles of qs bytes 32 (j / 2) ..; its 6-bit scale multiplies Σ q4 · q8, its min Σ q8.
template <>
struct q8k_lane<tensor_type::q4_k> {
  static constexpr int block_bytes = int(sizeof(block_q4_k));
  static constexpr bool has_mins = true;  // summ is not always 0
  uint32_t q[8];                          // the 32 nibbles as bytes
  int32_t sc, mn;
  uint32_t dbits;  // d, dmin (F16)

  HEARTH_HD static q8k_lane load(const uint8_t* blk, int j) {
    using namespace quant_detail;
    const u32x4 hdr = load_u32x4_a16(blk);
    const u32x4 lo = load_u32x4_a16(blk + offsetof(block_q4_k, qs) + 32 * (j / 2));
    const u32x4 hi = load_u32x4_a16(blk + offsetof(block_q4_k, qs) + 16 + 32 * (j / 2));
    const k_sub_bits s = k_scale_min_bits(hdr, j);
    q8k_lane l{};
    const int shift = 4 * (j & 1);
    HEARTH_UNROLL
    for (int k = 0; k < 4; ++k) {
      l.q[k] = (lo.w[k] >> shift) & 0x0f0f0f0fu;
      l.q[4 + k] = (hi.w[k] >> shift) & 0x0f0f0f0fu;
    }
    l.sc = int32_t(s.sc);
    l.mn = int32_t(s.mn);
    l.dbits = hdr.w[0];
    return l;
  }
  HEARTH_HD k_lane_sums sums(const uint32_t (&x)[8], int32_t s0, int32_t s1) const {
    return {sc * dot_i8<0, 8>(q, x), mn * (s0 + s1)};
  }
  // d = xd · d_w, dmin = xd · dmin_w, term = d · sumi - dmin · summ, each product rounded (no
  // fused multiply-add), as the CPU.
  HEARTH_HD static float term(float xd, uint32_t dbits, int32_t sumi, int32_t summ) {
    using namespace quant_detail;
    const float d = mul(xd, half_bits_to_float(dbits & 0xffffu));
    const float dmin = mul(xd, half_bits_to_float(dbits >> 16));
    return sub(mul(d, int32_to_float_rn(sumi)), mul(dmin, int32_to_float_rn(summ)));
  }
};

// Q6_K (dot_q6_k_q8_k_generic): sub-block j = 4h + g is values 128 h + 32 g ..: the low (g < 2)
// or high nibbles of ql bytes 64 h + 32 (g % 2) .., bits 2g, 2g + 1 of qh bytes 32 h .. above
// them, minus 32; an 8-bit scale per 16 values. Σ (q - 32) · q8 = Σ q · q8 - 32 Σ q8.
template <>
struct q8k_lane<tensor_type::q6_k> {
  static constexpr int block_bytes = int(sizeof(block_q6_k));
  static constexpr bool has_mins = false;
  uint32_t q[8];  // the 32 six-bit values (before - 32) as bytes
  int32_t sc0, sc1;
  uint32_t dbits;  // d (F16)

  HEARTH_HD static q8k_lane load(const uint8_t* blk, int j) {
    using namespace quant_detail;
    const int h = j >> 2, g = j & 3;
    uint32_t ql[8], qh[8];
    load_u32x8_a2(blk + offsetof(block_q6_k, ql) + 64 * h + 32 * (g & 1), ql);
    load_u32x8_a2(blk + offsetof(block_q6_k, qh) + 32 * h, qh);
    q8k_lane l{};
    const int ls = 4 * (g >> 1), hs = 2 * g;
    HEARTH_UNROLL
    for (int k = 0; k < 8; ++k)
      l.q[k] = ((ql[k] >> ls) & 0x0f0f0f0fu) | (((qh[k] >> hs) & 0x03030303u) << 4);
    const uint32_t sc = load_u16(blk + offsetof(block_q6_k, scales) + 2 * j);  // 2j, 2j + 1
    l.sc0 = int32_t(sc << 24) >> 24;
    l.sc1 = int32_t(sc << 16) >> 24;
    l.dbits = load_u16(blk + offsetof(block_q6_k, d));
    return l;
  }
  HEARTH_HD k_lane_sums sums(const uint32_t (&x)[8], int32_t s0, int32_t s1) const {
    return {sc0 * (dot_i8<0, 4>(q, x) - 32 * s0) + sc1 * (dot_i8<4, 8>(q, x) - 32 * s1), 0};
  }
  // (xd · d_w) · sumi, as the CPU.
  HEARTH_HD static float term(float xd, uint32_t dbits, int32_t sumi, int32_t) {
    using namespace quant_detail;
    return mul(mul(xd, half_bits_to_float(dbits & 0xffffu)), int32_to_float_rn(sumi));
  }
};

}  // namespace hearth::cuda
