// Tensor element types as GGUF stores them (the ggml type ids), their block layouts (with the
// accessors of packed bits that both dequantization and the CPU dot products read), and the
// scalar conversions between F32, F16 and BF16. Row conversions: engine/io/type-traits.h.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace hearth {

// Values are the on-disk ids of the GGUF format; never renumber.
enum class tensor_type : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
};

// Storage layout of one type: `block_elems` values take `block_bytes` bytes.
struct tensor_type_layout {
  std::string_view name;
  int64_t block_elems;
  int64_t block_bytes;
};

// The layout of a type id read from a file, or nothing when the id is not a known ggml type.
std::optional<tensor_type_layout> tensor_type_layout_of(uint32_t id);

// Name of a type ("q8_0"); "type <id>" style names are never returned for known types.
std::string_view tensor_type_name(tensor_type t);

// Bytes taken by one row of `n` elements (n must be a multiple of the block size).
int64_t tensor_type_row_bytes(tensor_type t, int64_t n);

// Parses a type name as the CLI accepts it ("f16", "Q8_0"); nothing when unknown.
std::optional<tensor_type> tensor_type_from_name(std::string_view name);

// The name of any llama.cpp file type (general.file_type, LLAMA_FTYPE_*) as llama-quantize
// writes it ("q4_k_m", "iq2_xs"), also those the quantizer (engine/convert/quantize.h) does not
// write; nothing when unknown.
std::optional<std::string_view> llama_ftype_name(uint64_t id);

// --- scalar conversions -------------------------------------------------------------------

// IEEE half -> float, exact.
float fp16_to_fp32(uint16_t h);
// float -> IEEE half, round to nearest even (as F16C's vcvtps2ph does).
uint16_t fp32_to_fp16(float f);

// F16 -> F32 through a table: exact, and much faster than bit manipulation per value.
const std::array<float, 65536>& fp16_table();

inline float bf16_to_fp32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float -> bfloat16, round to nearest even; NaN stays NaN (as ggml_compute_fp32_to_bf16).
inline uint16_t fp32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return uint16_t((u >> 16) | 64);
  return uint16_t((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

// --- block layouts of the quantized types we compute with --------------------------------

constexpr int k_q8_0_block = 32;
// Q8_0: 32 signed bytes sharing one F16 scale: x = d * q.
struct block_q8_0 {
  uint16_t d;  // F16 scale
  int8_t qs[k_q8_0_block];
};
static_assert(sizeof(block_q8_0) == 34);

constexpr int k_q4_0_block = 32;
// Q4_0: 32 4-bit values sharing one F16 scale: x[j] = d * ((qs[j] & 0xF) - 8) and
// x[j + 16] = d * ((qs[j] >> 4) - 8).
struct block_q4_0 {
  uint16_t d;  // F16 scale
  uint8_t qs[k_q4_0_block / 2];
};
static_assert(sizeof(block_q4_0) == 18);

constexpr int k_q4_1_block = 32;
// Q4_1: 32 4-bit values with an F16 scale and an F16 minimum: x[j] = d * (qs[j] & 0xF) + m and
// x[j + 16] = d * (qs[j] >> 4) + m.
struct block_q4_1 {
  uint16_t d;  // F16 scale
  uint16_t m;  // F16 minimum (the value of q = 0)
  uint8_t qs[k_q4_1_block / 2];
};
static_assert(sizeof(block_q4_1) == 20);

constexpr int k_q5_0_block = 32;
// Q5_0: 32 5-bit values sharing one F16 scale: x[j] = d * (q[j] - 16), q in [0, 31]. The low 4
// bits are packed as Q4_0's (value j in the low nibble of qs[j], value j + 16 in the high one);
// the fifth bit of value j is bit j of qh read as a little-endian uint32.
struct block_q5_0 {
  uint16_t d;  // F16 scale
  uint8_t qh[4];
  uint8_t qs[k_q5_0_block / 2];
};
static_assert(sizeof(block_q5_0) == 22);

// The fifth bits of a Q5_0/Q5_1 block as one word: value j's is bit j.
inline uint32_t q5_high_bits(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}
// Values j and j + 16 (j < 16) of a Q5_0/Q5_1 block, in [0, 31]; qh from q5_high_bits.
inline int q5_low(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] & 0x0F) | int(((qh >> j) & 1) << 4);
}
inline int q5_high(const uint8_t* qs, uint32_t qh, int j) {
  return (qs[j] >> 4) | int(((qh >> (j + k_q5_0_block / 2)) & 1) << 4);
}

constexpr int k_q5_1_block = 32;
// Q5_1: Q5_0's 5-bit values with an F16 minimum instead of the offset: x[j] = d * q[j] + m.
struct block_q5_1 {
  uint16_t d;  // F16 scale
  uint16_t m;  // F16 minimum
  uint8_t qh[4];
  uint8_t qs[k_q5_1_block / 2];
};
static_assert(sizeof(block_q5_1) == 24);

constexpr int k_q8_1_block = 32;
// Q8_1: the activations Q4_1 and Q5_1 dot with: Q8_0's bytes plus s = d * Σq (F16), so a
// weight block's minimum contributes m * s without touching the bytes again.
struct block_q8_1 {
  uint16_t d;  // F16 scale
  uint16_t s;  // F16 d * sum of qs
  int8_t qs[k_q8_1_block];
};
static_assert(sizeof(block_q8_1) == 36);

// The K-quants: super-blocks of 256 values in sub-blocks of 16 or 32, each sub-block with its own
// scale (and min), the scales quantized against one F16 scale per super-block.
constexpr int k_qk_k = 256;
constexpr int k_k_scale_bytes = 12;  // eight 6-bit scales and eight 6-bit mins, packed

// Q4_K: eight sub-blocks of 32; x = d * scale[s] * q - dmin * min[s], q in [0, 15].
// scales: for s < 4 scale[s] = scales[s] & 63, min[s] = scales[s + 4] & 63; for s >= 4 the low
// 4 bits are in scales[s + 4] (scale low nibble, min high nibble) and the high 2 bits are the top
// bits of scales[s - 4] (scale) and scales[s] (min). qs: 64 values per 32 bytes, the first 32 in
// the low nibbles, the next 32 in the high nibbles.
struct block_q4_k {
  uint16_t d;     // F16 scale of the scales
  uint16_t dmin;  // F16 scale of the mins
  uint8_t scales[k_k_scale_bytes];
  uint8_t qs[k_qk_k / 2];
};
static_assert(sizeof(block_q4_k) == 144);

// The eight 6-bit scales then the eight 6-bit mins of a Q4_K/Q5_K block, one per byte.
inline void k_scales_mins(const uint8_t* packed, uint8_t out[16]) {
  constexpr uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, low2 = 0x03030303;
  uint32_t u[4];
  std::memcpy(u, packed, k_k_scale_bytes);
  const uint32_t mins_0_3 = u[1] & low6;
  u[3] = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);  // mins 4..7
  u[1] = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);         // scales 4..7
  u[2] = mins_0_3;
  u[0] &= low6;  // scales 0..3
  std::memcpy(out, u, 16);
}

// Q5_K: as Q4_K with a fifth bit per value, q in [0, 31]: value i of 64-value chunk c takes bit
// 2c (first 32) or 2c + 1 (next 32) of qh[i % 32].
struct block_q5_k {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[k_k_scale_bytes];
  uint8_t qh[k_qk_k / 8];
  uint8_t qs[k_qk_k / 2];
};
static_assert(sizeof(block_q5_k) == 176);

// Q6_K: sixteen sub-blocks of 16 with signed 8-bit scales; x = d * scales[s] * (q - 32), q in
// [0, 63]. Each half of 128 values: value 32g + l (g < 4, l < 32) has its low 4 bits in
// ql[l + 32 (g & 1)] (low nibble for g < 2, high for g >= 2) and its high 2 bits at bit 2g of
// qh[l]; its scale is scales[l / 16 + 2g].
struct block_q6_k {
  uint8_t ql[k_qk_k / 2];
  uint8_t qh[k_qk_k / 4];
  int8_t scales[k_qk_k / 16];
  uint16_t d;  // F16
};
static_assert(sizeof(block_q6_k) == 210);

// Q8_K: the activations the K-quants dot with: 256 signed bytes, an F32 scale, and the sum of
// each 16 bytes (so a weight's mins can be applied without touching the bytes again).
struct block_q8_k {
  float d;
  int8_t qs[k_qk_k];
  int16_t bsums[k_qk_k / 16];
};
static_assert(sizeof(block_q8_k) == 292);

}  // namespace hearth
