#include "engine/io/type-traits.h"

#include <cstring>

#include "engine/io/type-rows.h"

namespace hearth {

void f32_to_float(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * 4);
}
void f32_from_float(const float* x, void* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * 4);
}

void f16_to_float(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  const auto& t = fp16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
void f16_from_float(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void bf16_to_float(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}
void bf16_from_float(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

namespace {

struct traits_row {
  tensor_type type;
  tensor_type_traits traits;
};

// Q8_1 and Q8_K are activation types: read back here, written only by the CPU backend's own
// activation quantizers.
constexpr traits_row k_rows[] = {
    {tensor_type::f32, {f32_to_float, f32_from_float}},
    {tensor_type::f16, {f16_to_float, f16_from_float}},
    {tensor_type::bf16, {bf16_to_float, bf16_from_float}},
    {tensor_type::q4_0, {q4_0_to_float, q4_0_from_float}},
    {tensor_type::q4_1, {q4_1_to_float, q4_1_from_float}},
    {tensor_type::q5_0, {q5_0_to_float, q5_0_from_float}},
    {tensor_type::q5_1, {q5_1_to_float, q5_1_from_float}},
    {tensor_type::q8_0, {q8_0_to_float, q8_0_from_float}},
    {tensor_type::q8_1, {q8_1_to_float, nullptr}},
    {tensor_type::q4_k, {q4_k_to_float, q4_k_from_float}},
    {tensor_type::q5_k, {q5_k_to_float, q5_k_from_float}},
    {tensor_type::q6_k, {q6_k_to_float, q6_k_from_float}},
    {tensor_type::q8_k, {q8_k_to_float, nullptr}},
};

}  // namespace

const tensor_type_traits& tensor_type_traits_of(tensor_type t) {
  for (const auto& row : k_rows) {
    if (row.type == t) return row.traits;
  }
  static constexpr tensor_type_traits none{};
  return none;
}

}  // namespace hearth
