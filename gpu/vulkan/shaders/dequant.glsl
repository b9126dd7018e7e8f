// Element j of a weight row starting at byte `row` of the uint-addressed buffer `weights`, as
// F32. The matrix shaders define MIN_APART before including this: a Q5_1 row then reads as its
// n_in values without the block minimums m, followed by the n_in / 32 minimums as further columns,
// met by the Q8_1 sums s that round_x.comp writes after each row of activations (X_COLS values a
// row), so m meets s as in the CPU's dot product. One #if block per weight type (WEIGHT_TYPE, set by the build: gpu/vulkan/CMakeLists.txt);
// a new type is a new block here plus its name in the build's weight type list. Block layouts:
// engine/io/tensor-type.h.
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_BF16 30
#define TYPE_Q8_0 8
#define TYPE_Q4_0 2
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14

// Blocks are byte-packed (Q4_0 18 bytes, Q5_0 22, Q5_1 24, Q4_K 144, Q5_K 176, Q6_K 210: Q4_0,
// Q5_0 and Q6_K blocks and rows start at any even byte), so every field is read with LOAD_U8 / LOAD_U16 from the
// uint-addressed buffer, which needs no 8/16-bit storage feature; 16-bit fields sit at even
// offsets because every block size and so every row's byte length is even.

#if WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K
// Scale and min of sub-block s (of 8) of a Q4_K/Q5_K block whose 12 packed scale bytes start at
// byte `sc`: the packing of engine/io/tensor-type.h block_q4_k (k_scales_mins there).
uvec2 k_scale_min(uint sc, uint s) {
  if (s < 4u) return uvec2(LOAD_U8(weights, sc + s) & 63u, LOAD_U8(weights, sc + s + 4u) & 63u);
  uint lo = LOAD_U8(weights, sc + s + 4u);
  return uvec2((lo & 0xfu) | ((LOAD_U8(weights, sc + s - 4u) >> 6) << 4),
               (lo >> 4) | ((LOAD_U8(weights, sc + s) >> 6) << 4));
}
#endif

#if WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1
// Value k (of 32) of a Q5_0/Q5_1 block whose 4 bytes of fifth bits (qh) start at byte `qh`,
// followed by the 16 nibble bytes, in [0, 31]: value k < 16 in the low nibble of qs[k], k + 16 in
// the high one; the fifth bit of value k is bit k of qh (engine/io/tensor-type.h block_q5_0).
uint q5_value(uint qh, uint k) {
  uint q = LOAD_U8(weights, qh + 4u + (k % 16u));
  q = k < 16u ? (q & 0xfu) : (q >> 4);
  return q | (((LOAD_U8(weights, qh + k / 8u) >> (k % 8u)) & 1u) << 4);
}
#endif

#if WEIGHT_TYPE == TYPE_Q5_1 && defined(MIN_APART)
#define X_COLS (p.n_in + p.n_in / 32u)
#else
#define X_COLS p.n_in
#endif

float dequant(uint row, uint j) {
#if WEIGHT_TYPE == TYPE_F32
  return uintBitsToFloat(weights[(row >> 2) + j]);
#elif WEIGHT_TYPE == TYPE_F16
  return f16_bits_to_f32(LOAD_U16(weights, row + 2u * j));
#elif WEIGHT_TYPE == TYPE_BF16
  return uintBitsToFloat(LOAD_U16(weights, row + 2u * j) << 16);
#elif WEIGHT_TYPE == TYPE_Q8_0
  // 34-byte blocks: F16 scale, 32 signed bytes.
  uint b = row + (j / 32u) * 34u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  int q = int(LOAD_U8(weights, b + 2u + (j % 32u)) << 24) >> 24;
  return d * float(q);
#elif WEIGHT_TYPE == TYPE_Q4_0
  // 18-byte blocks: F16 scale, 16 bytes holding values k (low nibble) and k + 16 (high).
  uint b = row + (j / 32u) * 18u;
  uint k = j % 32u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  uint q = LOAD_U8(weights, b + 2u + (k % 16u));
  q = k < 16u ? (q & 0xfu) : (q >> 4);
  return float(int(q) - 8) * d;
#elif WEIGHT_TYPE == TYPE_Q5_0
  // 22-byte blocks: F16 scale, 4 bytes of fifth bits, 16 nibble bytes; x = d (q - 16).
  uint b = row + (j / 32u) * 22u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  return float(int(q5_value(b + 2u, j % 32u)) - 16) * d;
#elif WEIGHT_TYPE == TYPE_Q5_1
  // 24-byte blocks: F16 scale d, F16 minimum m, 4 bytes of fifth bits, 16 nibble bytes;
  // x = d q + m.
#ifdef MIN_APART
  if (j >= p.n_in) return f16_bits_to_f32(LOAD_U16(weights, row + (j - p.n_in) * 24u + 2u));
#endif
  uint b = row + (j / 32u) * 24u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  float q = float(q5_value(b + 4u, j % 32u));
#ifdef MIN_APART
  return q * d;
#else
  return q * d + f16_bits_to_f32(LOAD_U16(weights, b + 2u));
#endif
#elif WEIGHT_TYPE == TYPE_Q4_K
  // 144-byte super-blocks: F16 d, F16 dmin, 12 scale bytes, 128 bytes of nibbles (64 values per
  // 32 bytes: the first 32 low nibbles, the next 32 high).
  uint b = row + (j / 256u) * 144u;
  uint k = j % 256u;
  uint s = k / 32u;
  uvec2 sm = k_scale_min(b + 4u, s);
  float d = f16_bits_to_f32(LOAD_U16(weights, b)) * float(sm.x);
  float m = f16_bits_to_f32(LOAD_U16(weights, b + 2u)) * float(sm.y);
  uint q = LOAD_U8(weights, b + 16u + 32u * (k / 64u) + k % 32u);
  q = (s & 1u) == 0u ? (q & 0xfu) : (q >> 4);
  return d * float(q) - m;
#elif WEIGHT_TYPE == TYPE_Q5_K
  // 176-byte super-blocks: as Q4_K with 32 bytes of fifth bits (qh) before the nibbles; value
  // 32 s + l takes bit s of qh[l].
  uint b = row + (j / 256u) * 176u;
  uint k = j % 256u;
  uint s = k / 32u;
  uint l = k % 32u;
  uvec2 sm = k_scale_min(b + 4u, s);
  float d = f16_bits_to_f32(LOAD_U16(weights, b)) * float(sm.x);
  float m = f16_bits_to_f32(LOAD_U16(weights, b + 2u)) * float(sm.y);
  uint q = LOAD_U8(weights, b + 48u + 32u * (k / 64u) + l);
  q = (s & 1u) == 0u ? (q & 0xfu) : (q >> 4);
  q |= ((LOAD_U8(weights, b + 16u + l) >> s) & 1u) << 4;
  return d * float(q) - m;
#elif WEIGHT_TYPE == TYPE_Q6_K
  // 210-byte super-blocks: 128 bytes ql, 64 bytes qh, 16 signed scales, F16 d. In each half of
  // 128 values, value 32 g + l has its low 4 bits in ql[l + 32 (g & 1)] (low nibble for g < 2),
  // its high 2 bits at bit 2 g of qh[l], its scale scales[l / 16 + 2 g].
  uint b = row + (j / 256u) * 210u;
  uint k = j % 256u;
  uint h = k / 128u;
  uint g = (k % 128u) / 32u;
  uint l = k % 32u;
  uint lo = LOAD_U8(weights, b + 64u * h + l + 32u * (g & 1u));
  lo = g < 2u ? (lo & 0xfu) : (lo >> 4);
  uint hi = (LOAD_U8(weights, b + 128u + 32u * h + l) >> (2u * g)) & 3u;
  int sc = int(LOAD_U8(weights, b + 192u + 8u * h + l / 16u + 2u * g) << 24) >> 24;
  float d = f16_bits_to_f32(LOAD_U16(weights, b + 208u));
  return d * float(sc) * float(int(lo | (hi << 4)) - 32);
#else
#error "unknown WEIGHT_TYPE"
#endif
}
