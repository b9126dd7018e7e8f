#include "engine/io/cpu-features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include <cstdlib>

namespace hearth {
namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && *v != '0';
}

// HEARTH_CPU_PORTABLE=1 forces the portable kernels (tests run both paths).
bool portable_forced() {
  return env_set("HEARTH_CPU_PORTABLE");
}

}  // namespace

#if defined(__x86_64__)

bool cpu_has_avx2() {
  static const bool has = [] {
    if (portable_forced()) return false;
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
    if (portable_forced() || env_set("HEARTH_CPU_NO_AVX512")) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c");
  }();
  return has;
}

bool cpu_packed_weights() {
  static const bool on = cpu_has_avx512_vnni() && !env_set("HEARTH_CPU_NO_PACK");
  return on;
}

bool cpu_decode_prefetch() {
  static const bool on = [] {
    if (const char* v = std::getenv("HEARTH_CPU_DECODE_PREFETCH"); v && *v) return *v != '0';
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    // The family is the base field, plus the extended field when the base one is 15.
    const unsigned base = (eax >> 8) & 0xF, extended = (eax >> 20) & 0xFF;
    return (base == 0xF ? base + extended : base) == 26;
  }();
  return on;
}

#else

bool cpu_has_avx2() {
  return false;
}

bool cpu_packed_weights() {
  return false;
}

bool cpu_has_avx512_vnni() {
  return false;
}

bool cpu_decode_prefetch() {
  return false;
}

#endif

#if defined(__aarch64__)

bool cpu_has_neon() {
  static const bool has = !portable_forced() && (getauxval(AT_HWCAP) & HWCAP_ASIMD);
  return has;
}

bool cpu_has_neon_dotprod() {
  static const bool has =
      cpu_has_neon() && !env_set("HEARTH_CPU_NO_DOTPROD") && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP);
  return has;
}

#else

bool cpu_has_neon() {
  return false;
}

bool cpu_has_neon_dotprod() {
  return false;
}

#endif

const char* cpu_kernel_path() {
  if (cpu_has_avx512_vnni()) return "avx512-vnni";
  if (cpu_has_avx2()) return "avx2";
  if (cpu_has_neon_dotprod()) return "neon-dotprod";
  if (cpu_has_neon()) return "neon";
  return "portable";
}

}  // namespace hearth
