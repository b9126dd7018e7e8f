#include "engine/cpu/vec-dot.h"

#include <cpuid.h>
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace hearth::cpu {
namespace {

// F16 -> F32 through a table: exact, and much faster than bit manipulation per value.
const std::array<float, 65536>& fp16_table() {
  static const auto table = [] {
    std::array<float, 65536> t{};
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(uint16_t(i));
    return t;
  }();
  return table;
}

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

// --- AVX2 kernels (chosen at run time) --------------------------------------------------

#define HEARTH_AVX2 __attribute__((target("avx2,fma,f16c")))

HEARTH_AVX2 float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

HEARTH_AVX2 float dot_f32_avx2(int64_t n, const void* wv, const void* xv) {
  const float* w = static_cast<const float*>(wv);
  const float* x = static_cast<const float*>(xv);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

HEARTH_AVX2 float dot_f16_avx2(int64_t n, const void* wv, const void* xv) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    const __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8)));
    const __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    acc0 = _mm256_fmadd_ps(w0, x0, acc0);
    acc1 = _mm256_fmadd_ps(w1, x1, acc1);
  }
  float sum = hsum256(_mm256_add_ps(acc0, acc1));
  const auto& t = fp16_table();
  for (; i < n; ++i) sum += t[w[i]] * t[x[i]];
  return sum;
}

HEARTH_AVX2 __m256 bf16x8_to_ps(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

HEARTH_AVX2 float dot_bf16_avx2(int64_t n, const void* wv, const void* xv) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(bf16x8_to_ps(w + i), bf16x8_to_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(bf16x8_to_ps(w + i + 8), bf16x8_to_ps(x + i + 8), acc1);
  }
  float sum = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += bf16_to_fp32(w[i]) * bf16_to_fp32(x[i]);
  return sum;
}

HEARTH_AVX2 float dot_q8_0_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q8_0* w = static_cast<const block_q8_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  __m256 acc = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    // |w| * sign(x, w): unsigned × signed bytes for maddubs, exact for the int8 range used.
    const __m256i aw = _mm256_sign_epi8(qw, qw);
    const __m256i sx = _mm256_sign_epi8(qx, qw);
    const __m256i p16 = _mm256_maddubs_epi16(aw, sx);
    const __m256i p32 = _mm256_madd_epi16(p16, ones);
    const __m256 d = _mm256_set1_ps(t[w[b].d] * t[x[b].d]);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p32), acc);
  }
  return hsum256(acc);
}

// --- conversions ------------------------------------------------------------------------

void f32_from_float(const float* x, void* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * 4);
}
void f32_to_float(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * 4);
}

void f16_from_float(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void f16_to_float(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  const auto& t = fp16_table();
  for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}

void bf16_from_float(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}
void bf16_to_float(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

// Round-to-nearest 8-bit blocks with scale max|x|/127, as ggml's quantize_row_q8_0_ref.
void q8_0_from_float(const float* x, void* yv, int64_t n) {
  block_q8_0* y = static_cast<block_q8_0*>(yv);
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    const float* xb = x + b * k_q8_0_block;
    float amax = 0;
    for (int i = 0; i < k_q8_0_block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int i = 0; i < k_q8_0_block; ++i) y[b].qs[i] = int8_t(std::lround(xb[i] * id));
  }
}
void q8_0_to_float(const void* xv, float* y, int64_t n) {
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  for (int64_t b = 0; b < n / k_q8_0_block; ++b) {
    const float d = t[x[b].d];
    for (int i = 0; i < k_q8_0_block; ++i) y[b * k_q8_0_block + i] = d * float(x[b].qs[i]);
  }
}

struct kernel_table {
  type_kernels f32, f16, bf16, q8_0;
};

const kernel_table& table() {
  static const kernel_table k = [] {
    const bool avx2 = cpu_has_avx2();
    kernel_table t{};
    t.f32 = {tensor_type::f32, avx2 ? dot_f32_avx2 : dot_f32_generic, f32_from_float, f32_to_float};
    t.f16 = {tensor_type::f16, avx2 ? dot_f16_avx2 : dot_f16_generic, f16_from_float, f16_to_float};
    t.bf16 = {tensor_type::bf16, avx2 ? dot_bf16_avx2 : dot_bf16_generic, bf16_from_float,
              bf16_to_float};
    t.q8_0 = {tensor_type::q8_0, avx2 ? dot_q8_0_avx2 : dot_q8_0_generic, q8_0_from_float,
              q8_0_to_float};
    return t;
  }();
  return k;
}

}  // namespace

bool cpu_has_avx2() {
  static const bool has = [] {
    // HEARTH_CPU_PORTABLE=1 forces the portable kernels (tests run both paths).
    const char* portable = std::getenv("HEARTH_CPU_PORTABLE");
    if (portable && *portable && *portable != '0') return false;
    // F16C is read from CPUID directly: clang 14's __builtin_cpu_supports does not know it.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    const bool f16c = (ecx >> 29) & 1;
    __builtin_cpu_init();
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
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
    default:
      return nullptr;
  }
}

}  // namespace hearth::cpu
