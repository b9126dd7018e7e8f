#include "engine/cpu/gemm.h"

#include "engine/io/cpu-features.h"

namespace hearth::cpu {

// Only x86 has tile kernels (AVX-512 VNNI); elsewhere every product goes through vec_dot.
const gemm_kernel* gemm_kernel_for([[maybe_unused]] tensor_type t) {
#if defined(__x86_64__)
  if (!cpu_has_avx512_vnni()) return nullptr;
  if (const auto* k = gemm_kernel_float_avx512(t)) return k;
  if (const auto* k = gemm_kernel_q8_avx512(t)) return k;
  return gemm_kernel_k_avx512(t);
#else
  return nullptr;
#endif
}

const packed_format* packed_format_for([[maybe_unused]] tensor_type t) {
#if defined(__x86_64__)
  if (!cpu_packed_weights()) return nullptr;
  switch (t) {
    case tensor_type::q4_k:
      return packed_format_q4_k_avx512();
    case tensor_type::q5_k:
      return packed_format_q5_k_avx512();
    case tensor_type::q6_k:
      return packed_format_q6_k_avx512();
    case tensor_type::f16:
    case tensor_type::bf16:
      return packed_format_float_avx512(t);
    default:
      return packed_format_q8_avx512(t);
  }
#else
  return nullptr;
#endif
}

}  // namespace hearth::cpu
