#include "engine/io/tensor-type.h"

#include <array>
#include <cctype>
#include <cmath>
#include <string>

namespace hearth {
namespace {

struct layout_row {
  uint32_t id;
  tensor_type_layout layout;
};

// Block sizes and byte counts from the GGUF specification (ggml.c type_traits).
constexpr std::array<layout_row, 31> k_types = {{
    {0, {"f32", 1, 4}},         {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},      {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},      {9, {"q8_1", 32, 36}},      {10, {"q2_k", 256, 84}},
    {11, {"q3_k", 256, 110}},   {12, {"q4_k", 256, 144}},   {13, {"q5_k", 256, 176}},
    {14, {"q6_k", 256, 210}},   {15, {"q8_k", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},  {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},   {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}}, {24, {"i8", 1, 1}},         {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},        {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},   {30, {"bf16", 1, 2}},       {34, {"tq1_0", 256, 54}},
    {35, {"tq2_0", 256, 66}},
}};

// The table's sizes are the block structs' of tensor-type.h (the CUDA and Vulkan backends check
// theirs against the same structs).
constexpr tensor_type_layout layout_in_table(tensor_type t) {
  for (const auto& row : k_types)
    if (row.id == uint32_t(t)) return row.layout;
  return {};
}
template <class Block>
constexpr bool table_matches(tensor_type t, int64_t elems) {
  return layout_in_table(t).block_elems == elems && layout_in_table(t).block_bytes == sizeof(Block);
}
static_assert(table_matches<block_q8_0>(tensor_type::q8_0, k_q8_0_block));
static_assert(table_matches<block_q4_0>(tensor_type::q4_0, k_q4_0_block));
static_assert(table_matches<block_q4_1>(tensor_type::q4_1, k_q4_1_block));
static_assert(table_matches<block_q5_0>(tensor_type::q5_0, k_q5_0_block));
static_assert(table_matches<block_q5_1>(tensor_type::q5_1, k_q5_1_block));
static_assert(table_matches<block_q8_1>(tensor_type::q8_1, k_q8_1_block));
static_assert(table_matches<block_q4_k>(tensor_type::q4_k, k_qk_k));
static_assert(table_matches<block_q5_k>(tensor_type::q5_k, k_qk_k));
static_assert(table_matches<block_q6_k>(tensor_type::q6_k, k_qk_k));
static_assert(table_matches<block_q8_k>(tensor_type::q8_k, k_qk_k));

// llama.h LLAMA_FTYPE_* by value, as llama-quantize names them; the gaps are types llama.cpp
// removed.
struct llama_ftype_row {
  uint64_t id;
  std::string_view name;
};

constexpr llama_ftype_row k_llama_ftypes[] = {
    {0, "f32"},      {1, "f16"},      {2, "q4_0"},    {3, "q4_1"},    {7, "q8_0"},
    {8, "q5_0"},     {9, "q5_1"},     {10, "q2_k"},   {11, "q3_k_s"}, {12, "q3_k_m"},
    {13, "q3_k_l"},  {14, "q4_k_s"},  {15, "q4_k_m"}, {16, "q5_k_s"}, {17, "q5_k_m"},
    {18, "q6_k"},    {19, "iq2_xxs"}, {20, "iq2_xs"}, {21, "q2_k_s"}, {22, "iq3_xs"},
    {23, "iq3_xxs"}, {24, "iq1_s"},   {25, "iq4_nl"}, {26, "iq3_s"},  {27, "iq3_m"},
    {28, "iq2_s"},   {29, "iq2_m"},   {30, "iq4_xs"}, {31, "iq1_m"},  {32, "bf16"},
    {36, "tq1_0"},   {37, "tq2_0"},
};

}  // namespace

std::optional<tensor_type_layout> tensor_type_layout_of(uint32_t id) {
  for (const auto& row : k_types) {
    if (row.id == id) return row.layout;
  }
  return std::nullopt;
}

std::string_view tensor_type_name(tensor_type t) {
  auto layout = tensor_type_layout_of(uint32_t(t));
  return layout ? layout->name : std::string_view("unknown");
}

int64_t tensor_type_row_bytes(tensor_type t, int64_t n) {
  auto layout = tensor_type_layout_of(uint32_t(t));
  return n / layout->block_elems * layout->block_bytes;
}

std::optional<tensor_type> tensor_type_from_name(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& row : k_types) {
    if (row.layout.name == lower) return tensor_type(row.id);
  }
  return std::nullopt;
}

std::optional<std::string_view> llama_ftype_name(uint64_t id) {
  for (const auto& r : k_llama_ftypes)
    if (r.id == id) return r.name;
  return std::nullopt;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = std::ldexp(float(mant), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

const std::array<float, 65536>& fp16_table() {
  static const auto table = [] {
    std::array<float, 65536> t{};
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(uint16_t(i));
    return t;
  }();
  return table;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return uint16_t(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) {                               // rounds to >= 65520: infinity
    return uint16_t(sign | 0x7c00);
  }
  if (abs < 0x38800000) {  // below the smallest normal half: subnormal or zero
    // value / 2^-24, rounded to nearest even by the FPU in float arithmetic.
    float v;
    std::memcpy(&v, &abs, 4);
    const float scaled = v * 16777216.0f;  // exact: a power-of-two scale
    const float rounded = std::nearbyint(scaled);
    return uint16_t(sign | uint32_t(rounded));
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

}  // namespace hearth
