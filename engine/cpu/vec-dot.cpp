#include "engine/cpu/vec-dot.h"

#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

// --- portable kernels -------------------------------------------------------------------
// Several accumulators so the compiler may keep independent chains in flight.

float dot_f32_generic(int64_t n, const void* wv, const void* xv) {
  const float* w = static_cast<const float*>(wv);
  const float* x = static_cast<const float*>(xv);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(w[i]) * double(x[i]);
  return float(sum);
}

float dot_f16_generic(int64_t n, const void* wv, const void* xv) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  const auto& t = fp16_table();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(t[w[i]]) * double(t[x[i]]);
  return float(sum);
}

float dot_bf16_generic(int64_t n, const void* wv, const void* xv) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_fp32(w[i])) * double(bf16_to_fp32(x[i]));
  return float(sum);
}

float dot_q8_0_generic(int64_t n, const void* wv, const void* xv) {
  const block_q8_0* w = static_cast<const block_q8_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    int32_t s = 0;
    for (int i = 0; i < k_q8_0_block; ++i) s += int32_t(w[b].qs[i]) * int32_t(x[b].qs[i]);
    sum += float(s) * (t[w[b].d] * t[x[b].d]);
  }
  return sum;
}

const kernel_table& table() {
  static const kernel_table k = [] {
    // Rows are read back (get_rows, attention's V) with the type's own conversion, and written
    // (activations, the KV cache) with it too, except where the backend has a faster one.
    const auto to_float = [](tensor_type t) { return tensor_type_traits_of(t).to_float; };
    const auto from_float = [](tensor_type t) { return tensor_type_traits_of(t).from_float; };
    kernel_table t{};
    t.f32 = {tensor_type::f32, dot_f32_generic, from_float(tensor_type::f32),
             to_float(tensor_type::f32)};
    t.f16 = {tensor_type::f16, dot_f16_generic, from_float(tensor_type::f16),
             to_float(tensor_type::f16)};
    t.bf16 = {tensor_type::bf16, dot_bf16_generic, from_float(tensor_type::bf16),
              to_float(tensor_type::bf16)};
    t.q8_0 = {tensor_type::q8_0, dot_q8_0_generic, from_float(tensor_type::q8_0),
              to_float(tensor_type::q8_0)};
    // Weight-only types (no from_float): the activation type is the reference engine's.
    t.q4_0 = {tensor_type::q8_0, dot_q4_0_q8_0_generic, nullptr, to_float(tensor_type::q4_0)};
    t.q4_k = {tensor_type::q8_k, dot_q4_k_q8_k_generic, nullptr, to_float(tensor_type::q4_k)};
    t.q5_k = {tensor_type::q8_k, dot_q5_k_q8_k_generic, nullptr, to_float(tensor_type::q5_k)};
    t.q6_k = {tensor_type::q8_k, dot_q6_k_q8_k_generic, nullptr, to_float(tensor_type::q6_k)};
    t.q8_k = {tensor_type::q8_k, dot_q8_k_q8_k_generic, q8_k_from_float,
              to_float(tensor_type::q8_k)};
    // llama-quantize's fallbacks for rows that 256 does not divide, and Q8_1 for their minimums.
    t.q4_1 = {tensor_type::q8_1, dot_q4_1_q8_1_generic, nullptr, to_float(tensor_type::q4_1)};
    t.q5_0 = {tensor_type::q8_0, dot_q5_0_q8_0_generic, nullptr, to_float(tensor_type::q5_0)};
    t.q5_1 = {tensor_type::q8_1, dot_q5_1_q8_1_generic, nullptr, to_float(tensor_type::q5_1)};
    t.q8_1 = {tensor_type::q8_1, dot_q8_1_q8_1_generic, q8_1_from_float_generic,
              to_float(tensor_type::q8_1)};
    // Then the SIMD kernels this CPU has (none with HEARTH_CPU_PORTABLE=1).
#if defined(__x86_64__)
    use_x86_kernels(t);
#elif defined(__aarch64__)
    use_neon_kernels(t);
#endif
    return t;
  }();
  return k;
}

}  // namespace

// --- Q4_0 · Q8_0 ------------------------------------------------------------------------

float dot_q4_0_q8_0_generic(int64_t n, const void* wv, const void* xv) {
  const block_q4_0* w = static_cast<const block_q4_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  constexpr int half = k_q4_0_block / 2;
  float sum = 0;
  for (int64_t b = 0; b < n / k_q4_0_block; ++b) {
    int32_t s = 0;
    for (int j = 0; j < half; ++j) {
      s += ((w[b].qs[j] & 0xF) - 8) * int32_t(x[b].qs[j]);
      s += ((w[b].qs[j] >> 4) - 8) * int32_t(x[b].qs[j + half]);
    }
    sum += float(s) * (t[w[b].d] * t[x[b].d]);
  }
  return sum;
}

const type_kernels* kernels_for(tensor_type t) {
  switch (t) {
    case tensor_type::f32:
      return &table().f32;
    case tensor_type::f16:
      return &table().f16;
    case tensor_type::bf16:
      return &table().bf16;
    case tensor_type::q8_0:
      return &table().q8_0;
    case tensor_type::q4_0:
      return &table().q4_0;
    case tensor_type::q4_k:
      return &table().q4_k;
    case tensor_type::q5_k:
      return &table().q5_k;
    case tensor_type::q6_k:
      return &table().q6_k;
    case tensor_type::q8_k:
      return &table().q8_k;
    case tensor_type::q4_1:
      return &table().q4_1;
    case tensor_type::q5_0:
      return &table().q5_0;
    case tensor_type::q5_1:
      return &table().q5_1;
    case tensor_type::q8_1:
      return &table().q8_1;
    default:
      return nullptr;
  }
}

}  // namespace hearth::cpu
