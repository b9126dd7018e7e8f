// Element j of a weight row starting at byte `row` of the uint-addressed buffer `weights`, as
// F32. The matrix shaders define MIN_APART before including this: a Q5_1 row then reads as its
// n_in values without the block minimums m, followed by the n_in / 32 minimums as further columns,
// met by the Q8_1 sums s that round_x.comp writes after each row of activations (X_COLS values a
// row), so m meets s as in the CPU's dot product. One #if block per weight type (WEIGHT_TYPE, set by the build: backends/vulkan/CMakeLists.txt);
// a new type is a new block here plus its name in the build's weight type list. Block layouts:
// engine/io/tensor-type.h.
#include "weight-types.glsl"

// Blocks are byte-packed (Q4_0 18 bytes, Q5_0 22, Q5_1 24, Q4_K 144, Q5_K 176, Q6_K 210: Q4_0,
// Q5_0 and Q6_K blocks and rows start at any even byte), so every field is read with LOAD_U8 / LOAD_U16 from the
// uint-addressed buffer, which needs no 8/16-bit storage feature; 16-bit fields sit at even
// offsets because every block size and so every row's byte length is even. Q4_K and Q5_K blocks
// start at multiples of 16 bytes and are read as 16-byte words (weights4).

#if WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K || WEIGHT_TYPE == TYPE_Q6_K || WHOLE_CHUNKS
// The weights as 16-byte words, aliasing `weights` (binding 0 of every shader that includes
// this). Q4_K and Q5_K super-blocks are 144 and 176 bytes, multiples of 16, and each tensor has a
// buffer of its own, so a block's head (F16 d and dmin, then 12 scale bytes) and a chunk's 32
// quant bytes are whole 16-byte words. WHOLE_CHUNKS (float rows whose length is a multiple of 32,
// which the host checks): every chunk is 64 bytes (F16, BF16) or 128 (F32) of a row that starts
// at a multiple of them. Q6_K blocks (210 bytes) start at any even byte: load_words reads the
// 16-byte words around a range and shifts. lavapipe runs a load as a loop over the lanes: a uvec4 is
// one loop, four uints four (Q4_K 2048 × 5632 for one token on lavapipe, alternating runs: 8.9
// and 10.8 ms with uints, 5.5 and 5.9 with uvec4s).
layout(std430, binding = 0) readonly buffer Weights4 { uvec4 weights4[]; };

// Scale d and minimum m of sub-block s (of 8) of the Q4_K/Q5_K super-block at byte b: the block's
// F16 d and dmin times the 6-bit scale and min packed in its 12 scale bytes, the packing of
// engine/io/tensor-type.h block_q4_k (k_scales_mins there).
vec2 k_scale_min(uint b, uint s) {
  uvec4 head = weights4[b >> 4];
#define K_SCALE_BYTE(k) \
  ((((k) < 4u ? head.y : (k) < 8u ? head.z : head.w) >> (8u * ((k) % 4u))) & 0xffu)
  uint lo = K_SCALE_BYTE(s + 4u);
  uvec2 q = s < 4u ? uvec2(K_SCALE_BYTE(s) & 63u, lo & 63u)
                   : uvec2((lo & 0xfu) | ((K_SCALE_BYTE(s & 3u) >> 6) << 4),  // s & 3: s - 4
                           (lo >> 4) | ((K_SCALE_BYTE(s) >> 6) << 4));
#undef K_SCALE_BYTE
  return vec2(f16_bits_to_f32(head.x) * float(q.x), f16_bits_to_f32(head.x >> 16) * float(q.y));
}
#endif

#if WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1
// Value k (of 32) of a Q5_0/Q5_1 block whose 4 bytes of fifth bits (qh) start at byte `qh`,
// followed by the 16 nibble bytes, in [0, 31]: value k < 16 in the low nibble of qs[k], k + 16 in
// the high one; the fifth bit of value k is bit k of qh (engine/io/tensor-type.h block_q5_0).
uint q5_value(uint qh, uint k) {
  uint q = LOAD_U8(weights, qh + Q5_QS_AFTER_QH + (k % 16u));
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
  uint b = row + (j / 32u) * Q8_0_BYTES;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  int q = int(LOAD_U8(weights, b + Q8_0_QS + (j % 32u)) << 24) >> 24;
  return d * float(q);
#elif WEIGHT_TYPE == TYPE_Q4_0
  // 18-byte blocks: F16 scale, 16 bytes holding values k (low nibble) and k + 16 (high).
  uint b = row + (j / 32u) * Q4_0_BYTES;
  uint k = j % 32u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  uint q = LOAD_U8(weights, b + Q4_0_QS + (k % 16u));
  q = k < 16u ? (q & 0xfu) : (q >> 4);
  return float(int(q) - 8) * d;
#elif WEIGHT_TYPE == TYPE_Q5_0
  // 22-byte blocks: F16 scale, 4 bytes of fifth bits, 16 nibble bytes; x = d (q - 16).
  uint b = row + (j / 32u) * Q5_0_BYTES;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  return float(int(q5_value(b + Q5_0_QH, j % 32u)) - 16) * d;
#elif WEIGHT_TYPE == TYPE_Q5_1
  // 24-byte blocks: F16 scale d, F16 minimum m, 4 bytes of fifth bits, 16 nibble bytes;
  // x = d q + m.
#ifdef MIN_APART
  if (j >= p.n_in) return f16_bits_to_f32(LOAD_U16(weights, row + (j - p.n_in) * Q5_1_BYTES + Q5_1_M));
#endif
  uint b = row + (j / 32u) * Q5_1_BYTES;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  float q = float(q5_value(b + Q5_1_QH, j % 32u));
#ifdef MIN_APART
  return q * d;
#else
  return q * d + f16_bits_to_f32(LOAD_U16(weights, b + Q5_1_M));
#endif
#elif WEIGHT_TYPE == TYPE_Q4_K
  // 144-byte super-blocks: F16 d, F16 dmin, 12 scale bytes, 128 bytes of nibbles (64 values per
  // 32 bytes: the first 32 low nibbles, the next 32 high).
  uint b = row + (j / 256u) * Q4_K_BYTES;
  uint k = j % 256u;
  uint s = k / 32u;
  vec2 dm = k_scale_min(b, s);
  float d = dm.x, m = dm.y;
  uint q = LOAD_U8(weights, b + Q4_K_QS + 32u * (k / 64u) + k % 32u);
  q = (s & 1u) == 0u ? (q & 0xfu) : (q >> 4);
  return d * float(q) - m;
#elif WEIGHT_TYPE == TYPE_Q5_K
  // 176-byte super-blocks: as Q4_K with 32 bytes of fifth bits (qh) before the nibbles; value
  // 32 s + l takes bit s of qh[l].
  uint b = row + (j / 256u) * Q5_K_BYTES;
  uint k = j % 256u;
  uint s = k / 32u;
  uint l = k % 32u;
  vec2 dm = k_scale_min(b, s);
  float d = dm.x, m = dm.y;
  uint q = LOAD_U8(weights, b + Q5_K_QS + 32u * (k / 64u) + l);
  q = (s & 1u) == 0u ? (q & 0xfu) : (q >> 4);
  q |= ((LOAD_U8(weights, b + Q5_K_QH + l) >> s) & 1u) << 4;
  return d * float(q) - m;
#elif WEIGHT_TYPE == TYPE_Q6_K
  // 210-byte super-blocks: 128 bytes ql, 64 bytes qh, 16 signed scales, F16 d. In each half of
  // 128 values, value 32 g + l has its low 4 bits in ql[l + 32 (g & 1)] (low nibble for g < 2),
  // its high 2 bits at bit 2 g of qh[l], its scale scales[l / 16 + 2 g].
  uint b = row + (j / 256u) * Q6_K_BYTES;
  uint k = j % 256u;
  uint h = k / 128u;
  uint g = (k % 128u) / 32u;
  uint l = k % 32u;
  uint lo = LOAD_U8(weights, b + Q6_K_QL + 64u * h + l + 32u * (g & 1u));
  lo = g < 2u ? (lo & 0xfu) : (lo >> 4);
  uint hi = (LOAD_U8(weights, b + Q6_K_QH + 32u * h + l) >> (2u * g)) & 3u;
  int sc = int(LOAD_U8(weights, b + Q6_K_SCALES + 8u * h + l / 16u + 2u * g) << 24) >> 24;
  float d = f16_bits_to_f32(LOAD_U16(weights, b + Q6_K_D));
  return d * float(sc) * float(int(lo | (hi << 4)) - 32);
#else
#error "unknown WEIGHT_TYPE"
#endif
}

// --- Whole chunks: values 32 c .. 32 c + 31 of a weight row, for the matrix-vector shader. A
// chunk is a block (Q8_0, Q4_0, Q5_0, Q5_1) or a 32-value sub-block of a K-quant super-block, so
// its scales are read once and its quants a uint (4 bytes) at a time; the values equal dequant()'s
// bit for bit. Float types: values past n_in (the row's length) are 0. Q5_1 (MIN_APART): the values without the
// minimum; chunk_min() is the minimum, met by column n_in + c.

// The 4-byte words at even byte offsets off + 4 i, i < n (n ≤ 8, a constant at each call), in u:
// rows of 18-, 22-, 34- and 210-byte blocks start at any even byte. They come from n + 1 aligned
// loads and one shift for all. lavapipe runs every load as a loop over the lanes and both sides
// of a branch, so reading each word on its own (a branch on alignment, then one or two loads)
// cost up to 3 n loads there (Q6_K's chunk: 48 where it is now 18; Q6_K 2048 × 32000 for one
// token took 96 ms, now 66). Where off is 4-aligned the last load repeats word n - 1, so nothing
// past the chunk's own bytes is read.
void load_u32s(uint off, uint n, out uint u[8]) {
  uint i0 = off >> 2;
  uint sh = (off & 2u) * 8u;  // 0 or 16
  uint a = weights[i0];
  for (uint i = 0u; i < 8u; ++i) {
    if (i < n) {
      uint b = weights[i0 + i + (i + 1u < n ? 1u : sh >> 4)];
      u[i] = (a >> sh) | ((b << 16) << (16u - sh));  // two shifts: 32 is not a valid shift
      a = b;
    }
  }
}

#if WEIGHT_TYPE == TYPE_Q6_K
#extension GL_EXT_control_flow_attributes : enable
// Words i < nw (nw ≤ 16, a constant at each call) of the bytes from `off` (even) on, read as the
// 16-byte words that hold bytes [off, off + nb): at most 5 loads for 16 words, where two
// load_u32s calls take 18 (lavapipe runs every load, of 4 bytes or 16, as a loop over the lanes). Loads past
// the range repeat its last 16-byte word (nothing past it is read); words past it are garbage.
// Every index is a constant of an unrolled loop, the alignment chosen by selects (lavapipe keeps a
// dynamically indexed private array in memory, a load per lane).
void load_words(uint off, uint nb, uint nw, out uint u[16]) {
  uint q0 = off >> 4, last = (off + nb - 1u) >> 4;
  uint n_loads = (4u * nw + 14u) / 16u + 1u;
  uint v[20];
  [[unroll]] for (uint k = 0u; k < 5u; ++k) {
    uvec4 x = k < n_loads ? weights4[min(q0 + k, last)] : uvec4(0u);
    v[4u * k] = x.x;
    v[4u * k + 1u] = x.y;
    v[4u * k + 2u] = x.z;
    v[4u * k + 3u] = x.w;
  }
  uint w0 = (off & 15u) >> 2;
  uint sh = (off & 2u) * 8u;  // 0 or 16
  [[unroll]] for (uint i = 0u; i < 16u; ++i) {
    if (i < nw) {
      uint a = w0 == 0u ? v[i] : w0 == 1u ? v[i + 1u] : w0 == 2u ? v[i + 2u] : v[i + 3u];
      uint b = w0 == 0u ? v[i + 1u] : w0 == 1u ? v[i + 2u] : w0 == 2u ? v[i + 3u] : v[i + 4u];
      u[i] = (a >> sh) | ((b << 16) << (16u - sh));  // two shifts: 32 is not a valid shift
    } else {
      u[i] = 0u;
    }
  }
}

// Half a Q6_K super-block (128 values, 4 chunks) read at once, for a layout whose invocation takes
// a row's chunks in order (mul_mat.comp ROW_PER_LANE): chunk g of the half reads ql[32 (g & 1)]
// on (its low nibbles for g < 2, high ones after), all 32 bytes of qh (2 bits each) and 2 scales,
// so 4 dequant_chunk calls load 84 words (21 each) where this loads 11 16-byte words. Every array
// is indexed by constants of unrolled loops. The values are dequant_chunk's bit for bit. On
// lavapipe, one token, alternating runs: Q6_K 2048 x 32000 75 and 70 ms -> 57 and 51; 2048 x 2048
// 6.2 and 8.0 -> 4.6 and 4.6. (Reading the half with load_u32s, 31 loads, gained little; the
// same with the constant weights of an ablation took 1.4 ms: the loads were most of the time.)
struct q6k_half {
  uint ql0[8], ql1[8];  // ql[0..31] and ql[32..63] of the half
  uint qh[8];           // qh[0..31] of the half
  float ds[8];          // d times each of the half's 8 scales (16 values each)
};
// c: the half's first chunk (a multiple of 4).
void q6k_load_half(uint row, uint c, out q6k_half hb) {
  uint b = row + (c / 8u) * Q6_K_BYTES;
  uint h = (c % 8u) / 4u;
  uint u[16];
  load_words(b + Q6_K_QL + 64u * h, 64u, 16u, u);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    hb.ql0[i] = u[i];
    hb.ql1[i] = u[8u + i];
  }
  load_words(b + Q6_K_QH + 32u * h, 32u, 8u, u);
  [[unroll]] for (uint i = 0u; i < 8u; ++i) hb.qh[i] = u[i];
  // The block's 16 scales and d: bytes 192..209, words 0-3 and the low half of word 4.
  load_words(b + Q6_K_SCALES, Q6_K_BYTES - Q6_K_SCALES, 5u, u);
  float d = f16_bits_to_f32(u[4] & 0xffffu);
  uint s0 = h == 0u ? u[0] : u[2], s1 = h == 0u ? u[1] : u[3];
  [[unroll]] for (uint i = 0u; i < 8u; ++i)
    hb.ds[i] = d * float(int(((i < 4u ? s0 : s1) >> (8u * (i % 4u))) << 24) >> 24);
}
// Chunk g (of 4) of a half read by q6k_load_half.
void q6k_chunk(in q6k_half hb, uint g, out float w[32]) {
  uint lo_shift = g < 2u ? 0u : 4u;
  bool odd = (g & 1u) != 0u;
  // The chunk's two scales, chosen without indexing by g.
  float ds0 = g == 0u ? hb.ds[0] : g == 1u ? hb.ds[2] : g == 2u ? hb.ds[4] : hb.ds[6];
  float ds1 = g == 0u ? hb.ds[1] : g == 1u ? hb.ds[3] : g == 2u ? hb.ds[5] : hb.ds[7];
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    // Four 6-bit quants at once, a byte each; then q - 32 exactly as (2^23 + q) - (2^23 + 32),
    // from the float whose mantissa is q (no integer-to-float conversion).
    uint q = (((odd ? hb.ql1[i] : hb.ql0[i]) >> lo_shift) & 0x0f0f0f0fu) |
             (((hb.qh[i] >> (2u * g)) & 0x03030303u) << 4);
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      float v = uintBitsToFloat(0x4b000000u | ((q >> (8u * k)) & 0xffu)) - 8388640.0;
      w[4u * i + k] = (i < 4u ? ds0 : ds1) * v;
    }
  }
}
#endif

#if WEIGHT_TYPE == TYPE_Q5_1 && defined(MIN_APART)
#define CHUNK_MIN 1
float chunk_min(uint row, uint c) { return f16_bits_to_f32(LOAD_U16(weights, row + c * Q5_1_BYTES + Q5_1_M)); }
#endif

void dequant_chunk(uint row, uint c, uint n_in, out float w[32]) {
#if WHOLE_CHUNKS && WEIGHT_TYPE == TYPE_F32
  uint b4 = (row >> 4) + 8u * c;
  for (uint i = 0u; i < 8u; ++i) {
    vec4 v = uintBitsToFloat(weights4[b4 + i]);
    w[4u * i] = v.x;
    w[4u * i + 1u] = v.y;
    w[4u * i + 2u] = v.z;
    w[4u * i + 3u] = v.w;
  }
#elif WHOLE_CHUNKS
  uint b4 = (row >> 4) + 4u * c;
  for (uint i = 0u; i < 4u; ++i) {
    uvec4 u = weights4[b4 + i];
    for (uint k = 0u; k < 4u; ++k) {
#if WEIGHT_TYPE == TYPE_F16
      vec2 h = unpackHalf2x16(u[k]);
      w[8u * i + 2u * k] = h.x;
      w[8u * i + 2u * k + 1u] = h.y;
#else
      w[8u * i + 2u * k] = uintBitsToFloat(u[k] << 16);
      w[8u * i + 2u * k + 1u] = uintBitsToFloat(u[k] & 0xffff0000u);
#endif
    }
  }
#elif WEIGHT_TYPE == TYPE_F32
  uint j0 = 32u * c;
  for (uint i = 0u; i < 32u; ++i)
    w[i] = j0 + i < n_in ? uintBitsToFloat(weights[(row >> 2) + j0 + i]) : 0.0;
#elif WEIGHT_TYPE == TYPE_F16 || WEIGHT_TYPE == TYPE_BF16
  uint j0 = 32u * c;
  for (uint i = 0u; i < 32u; ++i) w[i] = j0 + i < n_in ? dequant(row, j0 + i) : 0.0;
#elif WEIGHT_TYPE == TYPE_Q8_0
  uint b = row + c * Q8_0_BYTES;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  uint q[8];
  load_u32s(b + Q8_0_QS, 8u, q);
  for (uint i = 0u; i < 8u; ++i) {
    for (uint k = 0u; k < 4u; ++k) w[4u * i + k] = d * float(int(q[i] << (24u - 8u * k)) >> 24);
  }
#elif WEIGHT_TYPE == TYPE_Q4_0
  uint b = row + c * Q4_0_BYTES;
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  uint qs[8];
  load_u32s(b + Q4_0_QS, 4u, qs);
  for (uint i = 0u; i < 4u; ++i) {
    uint u = qs[i];
    for (uint k = 0u; k < 4u; ++k) {
      uint q = (u >> (8u * k)) & 0xffu;
      w[4u * i + k] = float(int(q & 0xfu) - 8) * d;
      w[16u + 4u * i + k] = float(int(q >> 4) - 8) * d;
    }
  }
#elif WEIGHT_TYPE == TYPE_Q5_0 || WEIGHT_TYPE == TYPE_Q5_1
  // The 4 bytes of fifth bits (qh), then the 16 nibble bytes: 5 words in a row.
#if WEIGHT_TYPE == TYPE_Q5_0
  uint b = row + c * Q5_0_BYTES;
  uint words[8];
  load_u32s(b + Q5_0_QH, 5u, words);
#else
  uint b = row + c * Q5_1_BYTES;
  uint words[8];
  load_u32s(b + Q5_1_QH, 5u, words);
#endif
  uint qh = words[0];
  float d = f16_bits_to_f32(LOAD_U16(weights, b));
  for (uint i = 0u; i < 4u; ++i) {
    uint u = words[1u + i];
    for (uint k = 0u; k < 4u; ++k) {
      uint l = 4u * i + k;
      uint q = (u >> (8u * k)) & 0xffu;
      uint lo = (q & 0xfu) | (((qh >> l) & 1u) << 4);
      uint hi = (q >> 4) | (((qh >> (l + 16u)) & 1u) << 4);
#if WEIGHT_TYPE == TYPE_Q5_0
      w[l] = float(int(lo) - 16) * d;
      w[l + 16u] = float(int(hi) - 16) * d;
#elif defined(MIN_APART)
      w[l] = float(lo) * d;
      w[l + 16u] = float(hi) * d;
#else
      float m = f16_bits_to_f32(LOAD_U16(weights, b + Q5_1_M));
      w[l] = float(lo) * d + m;
      w[l + 16u] = float(hi) * d + m;
#endif
    }
  }
#elif WEIGHT_TYPE == TYPE_Q4_K || WEIGHT_TYPE == TYPE_Q5_K
#if WEIGHT_TYPE == TYPE_Q4_K
  uint b = row + (c / 8u) * Q4_K_BYTES;
  uint qs = b + Q4_K_QS;
#else
  uint b = row + (c / 8u) * Q5_K_BYTES;
  uint qs = b + Q5_K_QS;
#endif
  uint s = c % 8u;
  vec2 dm = k_scale_min(b, s);
  float d = dm.x, m = dm.y;
  uint shift = 4u * (s & 1u);
  uint base = (qs + 32u * (s / 2u)) >> 4;  // 16-aligned: 144 and 176 are multiples of 16
  uvec4 q0 = weights4[base], q1 = weights4[base + 1u];
#if WEIGHT_TYPE == TYPE_Q5_K
  uvec4 h0 = weights4[(b + Q5_K_QH) >> 4], h1 = weights4[((b + Q5_K_QH) >> 4) + 1u];
#endif
  for (uint i = 0u; i < 8u; ++i) {
    uint u = i < 4u ? q0[i & 3u] : q1[i & 3u];
#if WEIGHT_TYPE == TYPE_Q5_K
    uint h = i < 4u ? h0[i & 3u] : h1[i & 3u];
#endif
    for (uint k = 0u; k < 4u; ++k) {
      uint q = (u >> (8u * k + shift)) & 0xfu;
#if WEIGHT_TYPE == TYPE_Q5_K
      q |= ((h >> (8u * k + s)) & 1u) << 4;
#endif
      w[4u * i + k] = d * float(q) - m;
    }
  }
#elif WEIGHT_TYPE == TYPE_Q6_K
  uint b = row + (c / 8u) * Q6_K_BYTES;
  uint h = (c % 8u) / 4u;
  uint g = c % 4u;
  float d = f16_bits_to_f32(LOAD_U16(weights, b + Q6_K_D));
  uint sc = b + Q6_K_SCALES + 8u * h + 2u * g;
  float ds0 = d * float(int(LOAD_U8(weights, sc) << 24) >> 24);
  float ds1 = d * float(int(LOAD_U8(weights, sc + 1u) << 24) >> 24);
  uint ql = b + Q6_K_QL + 64u * h + 32u * (g & 1u);
  uint qh = b + Q6_K_QH + 32u * h;
  uint lo_shift = g < 2u ? 0u : 4u;
  uint uls[8], uhs[8];
  load_u32s(ql, 8u, uls);
  load_u32s(qh, 8u, uhs);
  for (uint i = 0u; i < 8u; ++i) {
    uint ul = uls[i];
    uint uh = uhs[i];
    for (uint k = 0u; k < 4u; ++k) {
      uint lo = (ul >> (8u * k + lo_shift)) & 0xfu;
      uint hi = (uh >> (8u * k + 2u * g)) & 3u;
      w[4u * i + k] = (i < 4u ? ds0 : ds1) * float(int(lo | (hi << 4)) - 32);
    }
  }
#else
#error "unknown WEIGHT_TYPE"
#endif
}
