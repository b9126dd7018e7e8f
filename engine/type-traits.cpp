#include "engine/type-traits.h"

#include <cstring>

#include "engine/type-rows.h"

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

const tensor_type_traits& tensor_type_traits_of(tensor_type t) {
  static const tensor_type_traits f32{f32_to_float, f32_from_float};
  static const tensor_type_traits f16{f16_to_float, f16_from_float};
  static const tensor_type_traits bf16{bf16_to_float, bf16_from_float};
  static const tensor_type_traits q4_0{q4_0_to_float, q4_0_from_float};
  static const tensor_type_traits q4_1{q4_1_to_float, q4_1_from_float};
  static const tensor_type_traits q5_0{q5_0_to_float, q5_0_from_float};
  static const tensor_type_traits q5_1{q5_1_to_float, q5_1_from_float};
  static const tensor_type_traits q8_0{q8_0_to_float, q8_0_from_float};
  static const tensor_type_traits q4_k{q4_k_to_float, q4_k_from_float};
  static const tensor_type_traits q5_k{q5_k_to_float, q5_k_from_float};
  static const tensor_type_traits q6_k{q6_k_to_float, q6_k_from_float};
  // Activation types: read back here; written only by the CPU backend's own quantizers.
  static const tensor_type_traits q8_1{q8_1_to_float, nullptr};
  static const tensor_type_traits q8_k{q8_k_to_float, nullptr};
  static const tensor_type_traits none{};
  switch (t) {
    case tensor_type::f32:
      return f32;
    case tensor_type::f16:
      return f16;
    case tensor_type::bf16:
      return bf16;
    case tensor_type::q4_0:
      return q4_0;
    case tensor_type::q4_1:
      return q4_1;
    case tensor_type::q5_0:
      return q5_0;
    case tensor_type::q5_1:
      return q5_1;
    case tensor_type::q8_0:
      return q8_0;
    case tensor_type::q8_1:
      return q8_1;
    case tensor_type::q4_k:
      return q4_k;
    case tensor_type::q5_k:
      return q5_k;
    case tensor_type::q6_k:
      return q6_k;
    case tensor_type::q8_k:
      return q8_k;
    default:
      return none;
  }
}

}  // namespace hearth
