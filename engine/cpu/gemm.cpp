#include "engine/cpu/gemm.h"

#include <cstdlib>

namespace hearth::cpu {

bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    const char* portable = std::getenv("HEARTH_CPU_PORTABLE");
    if (portable && *portable && *portable != '0') return false;
    const char* no512 = std::getenv("HEARTH_CPU_NO_AVX512");
    if (no512 && *no512 && *no512 != '0') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

const gemm_kernel* gemm_kernel_for(tensor_type t) {
  if (!cpu_has_avx512_vnni()) return nullptr;
  if (const auto* k = gemm_kernel_float_avx512(t)) return k;
  if (const auto* k = gemm_kernel_q8_avx512(t)) return k;
  return gemm_kernel_k_avx512(t);
}

}  // namespace hearth::cpu
