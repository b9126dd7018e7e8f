#include "engine/cpu/gemm.h"

#include "engine/io/cpu-features.h"

namespace hearth::cpu {

const gemm_kernel* gemm_kernel_for(tensor_type t) {
  if (!cpu_has_avx512_vnni()) return nullptr;
  if (const auto* k = gemm_kernel_float_avx512(t)) return k;
  if (const auto* k = gemm_kernel_q8_avx512(t)) return k;
  return gemm_kernel_k_avx512(t);
}

}  // namespace hearth::cpu
