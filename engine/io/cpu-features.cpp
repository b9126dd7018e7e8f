#include "engine/io/cpu-features.h"

#include <cpuid.h>

#include <cstdlib>

namespace hearth {
namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && *v != '0';
}

}  // namespace

bool cpu_has_avx2() {
  static const bool has = [] {
    // HEARTH_CPU_PORTABLE=1 forces the portable kernels (tests run both paths).
    if (env_set("HEARTH_CPU_PORTABLE")) return false;
    // F16C is read from CPUID directly: clang 14's __builtin_cpu_supports does not know it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const bool f16c = (ecx >> 29) & 1;
    __builtin_cpu_init();
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    if (env_set("HEARTH_CPU_PORTABLE") || env_set("HEARTH_CPU_NO_AVX512")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

}  // namespace hearth
