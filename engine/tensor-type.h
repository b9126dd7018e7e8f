// Tensor element types as GGUF stores them (the ggml type ids), their block layouts, and the
// scalar conversions between F32, F16 and BF16.
#pragma once

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

// --- scalar conversions -------------------------------------------------------------------

// IEEE half -> float, exact.
float fp16_to_fp32(uint16_t h);
// float -> IEEE half, round to nearest even (as F16C's vcvtps2ph does).
uint16_t fp32_to_fp16(float f);

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

}  // namespace hearth
