// A stand-in for engine/io/cpu-features.cpp in fuzz libraries that need the row conversions:
// every SIMD path off, as HEARTH_CPU_PORTABLE=1 makes them (the portable conversions write the
// same bytes: engine/io/type-traits_test.cpp). The real probe does not build with the fuzz
// preset's clang 14, whose __builtin_cpu_supports does not know "avx512vnni".
#include "engine/io/cpu-features.h"

namespace hearth {

bool cpu_has_avx2() {
  return false;
}
bool cpu_has_avx512_vnni() {
  return false;
}
bool cpu_packed_weights() {
  return false;
}
bool cpu_decode_prefetch() {
  return false;
}
bool cpu_has_neon() {
  return false;
}
bool cpu_has_neon_dotprod() {
  return false;
}
const char* cpu_kernel_path() {
  return "portable";
}

}  // namespace hearth
