// arm64's kernels (compiled only there; chosen at run time by use_neon_kernels): F32 and F16 dot
// products with NEON's F32 FMAs, the F16 row conversions in hardware, and the 8-bit dot products
// of Q8_0, Q4_0, Q4_K and Q6_K (vec-dot-neon-int8.h) in two builds: SDOT where the CPU has it
// (HWCAP_ASIMDDP), widening multiplies where it does not. Every other type keeps its portable
// kernel.
#include <arm_neon.h>

#include "engine/cpu/vec-dot-kernels.h"
#include "engine/io/cpu-features.h"

namespace hearth::cpu {
namespace {

namespace plain {

// Products of the low and high 8 bytes widened to int16 (|a·b| <= 2^14), pairs added into int32.
inline int32x4_t dot_s8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
  acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
  return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#include "engine/cpu/vec-dot-neon-int8.h"

}  // namespace plain

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
namespace dotprod {

inline int32x4_t dot_s8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return vdotq_s32(acc, a, b);
}

#include "engine/cpu/vec-dot-neon-int8.h"

}  // namespace dotprod
#pragma GCC pop_options

float dot_f32_neon(int64_t n, const void* wv, const void* xv) {
  const float* w = static_cast<const float*>(wv);
  const float* x = static_cast<const float*>(xv);
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(w + i), vld1q_f32(x + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(w + i + 4), vld1q_f32(x + i + 4));
  }
  float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

inline float32x4_t f16x4_to_f32(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

// FCVT rounds to nearest even (the default FPCR), as fp32_to_fp16: the KV cache goes this way.
void f16_from_float_neon(const float* x, void* yv, int64_t n) {
  uint16_t* y = static_cast<uint16_t*>(yv);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void f16_to_float_neon(const void* xv, float* y, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f16x4_to_f32(x + i));
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

}  // namespace

float dot_f16_neon(int64_t n, const void* wv, const void* xv) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const uint16_t* x = static_cast<const uint16_t*>(xv);
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc0 = vfmaq_f32(acc0, f16x4_to_f32(w + i), f16x4_to_f32(x + i));
    acc1 = vfmaq_f32(acc1, f16x4_to_f32(w + i + 4), f16x4_to_f32(x + i + 4));
  }
  float sum = vaddvq_f32(vaddq_f32(acc0, acc1));
  for (; i < n; ++i) sum += fp16_to_fp32(w[i]) * fp16_to_fp32(x[i]);
  return sum;
}

float dot_q8_0_neon(int64_t n, const void* w, const void* x) {
  return plain::q8_0(n, w, x);
}
float dot_q4_0_q8_0_neon(int64_t n, const void* w, const void* x) {
  return plain::q4_0(n, w, x);
}
float dot_q4_k_q8_k_neon(int64_t n, const void* w, const void* x) {
  return plain::q4_k(n, w, x);
}
float dot_q6_k_q8_k_neon(int64_t n, const void* w, const void* x) {
  return plain::q6_k(n, w, x);
}

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
float dot_q8_0_neon_dotprod(int64_t n, const void* w, const void* x) {
  return dotprod::q8_0(n, w, x);
}
float dot_q4_0_q8_0_neon_dotprod(int64_t n, const void* w, const void* x) {
  return dotprod::q4_0(n, w, x);
}
float dot_q4_k_q8_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return dotprod::q4_k(n, w, x);
}
float dot_q6_k_q8_k_neon_dotprod(int64_t n, const void* w, const void* x) {
  return dotprod::q6_k(n, w, x);
}
#pragma GCC pop_options

void use_neon_kernels(kernel_table& t) {
  if (!cpu_has_neon()) return;
  const bool dot = cpu_has_neon_dotprod();
  t.f32.vec_dot = dot_f32_neon;
  t.f16 = {tensor_type::f16, dot_f16_neon, f16_from_float_neon, f16_to_float_neon};
  t.q8_0.vec_dot = dot ? dot_q8_0_neon_dotprod : dot_q8_0_neon;
  t.q4_0.vec_dot = dot ? dot_q4_0_q8_0_neon_dotprod : dot_q4_0_q8_0_neon;
  t.q4_k.vec_dot = dot ? dot_q4_k_q8_k_neon_dotprod : dot_q4_k_q8_k_neon;
  t.q6_k.vec_dot = dot ? dot_q6_k_q8_k_neon_dotprod : dot_q6_k_q8_k_neon;
}

}  // namespace hearth::cpu
