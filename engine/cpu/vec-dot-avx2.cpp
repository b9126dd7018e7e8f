// The AVX2 kernels of vec-dot.cpp's types (F32, F16, BF16, Q8_0, Q4_0) and the F16C row
// conversions (x86 only), and which of x86's kernels kernels_for() hands out: AVX2 where the CPU
// has AVX2 + FMA + F16C. Where it has AVX-512 VNNI too, products of the types with a tile kernel
// go through the tiles at every token count (mul-mat.cpp, tiled_for), not through these.
#include "engine/cpu/avx2.h"
#include "engine/cpu/vec-dot-kernels.h"
#include "engine/io/cpu-features.h"

namespace hearth::cpu {
namespace {

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

// --- conversions the backend does its own way ----------------------------------------------
// Everything else is the type's conversion (engine/io/type-traits.h).

// F16C rounds to nearest even, as fp32_to_fp16: the KV cache and attention's queries go this way.
HEARTH_AVX2 void f16_from_float_avx2(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

// F16C converts eight values per instruction: attention reads every V row of an F16 cache this way.
HEARTH_AVX2 void f16_to_float_avx2(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = fp16_to_fp32_f16c(x[i]);
}

// Σ (q - 8) · x over one block as 8 int32 lanes: maddubs multiplies the unsigned nibbles by the
// signed bytes (no saturation: 2·15·127 fits int16), and 8·Σx is taken off the same way.
HEARTH_AVX2 inline __m256i q4_0_block_dot(const block_q4_0& w, const block_q8_0& x) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m8 = _mm256_set1_epi8(8);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
  // Low nibbles are values 0..15, high nibbles 16..31: one 128-bit lane each.
  const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), m4);
  const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(q, qx), _mm256_maddubs_epi16(m8, qx));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

}  // namespace

HEARTH_AVX2 float dot_q4_0_q8_0_avx2(int64_t n, const void* wv, const void* xv) {
  const block_q4_0* w = static_cast<const block_q4_0*>(wv);
  const block_q8_0* x = static_cast<const block_q8_0*>(xv);
  const auto& t = fp16_table();
  const int64_t nb = n / k_q4_0_block;
  // Two accumulators: consecutive blocks' FMAs do not wait on each other.
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m256i s0 = q4_0_block_dot(w[b], x[b]);
    const __m256i s1 = q4_0_block_dot(w[b + 1], x[b + 1]);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(t[w[b].d] * t[x[b].d]), _mm256_cvtepi32_ps(s0), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(t[w[b + 1].d] * t[x[b + 1].d]), _mm256_cvtepi32_ps(s1),
                           acc1);
  }
  for (; b < nb; ++b) {
    const __m256i s0 = q4_0_block_dot(w[b], x[b]);
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(t[w[b].d] * t[x[b].d]), _mm256_cvtepi32_ps(s0), acc0);
  }
  return hsum256(_mm256_add_ps(acc0, acc1));
}

void use_x86_kernels(kernel_table& t) {
  if (cpu_has_avx2()) {
    t.f32.vec_dot = dot_f32_avx2;
    t.f16 = {tensor_type::f16, dot_f16_avx2, f16_from_float_avx2, f16_to_float_avx2};
    t.bf16.vec_dot = dot_bf16_avx2;
    t.q8_0.vec_dot = dot_q8_0_avx2;
    t.q4_0.vec_dot = dot_q4_0_q8_0_avx2;
    t.q4_k.vec_dot = dot_q4_k_q8_k_avx2;
    t.q5_k.vec_dot = dot_q5_k_q8_k_avx2;
    t.q6_k.vec_dot = dot_q6_k_q8_k_avx2;
    t.q8_k.vec_dot = dot_q8_k_q8_k_avx2;
    t.q4_1.vec_dot = dot_q4_1_q8_1_avx2;
    t.q5_0.vec_dot = dot_q5_0_q8_0_avx2;
    t.q5_1.vec_dot = dot_q5_1_q8_1_avx2;
    t.q8_1.vec_dot = dot_q8_1_q8_1_avx2;
    t.q8_1.from_float = q8_1_from_float_avx2;
  }
}

}  // namespace hearth::cpu
