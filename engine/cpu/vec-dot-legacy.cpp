// The older 32-value formats llama-quantize falls back to when a row is not a multiple of 256
// (Qwen2.5-0.5B's 896-wide rows: Q4_K -> Q5_0, Q5_K -> Q5_1): Q4_1, Q5_0 and Q5_1 weights, and
// Q8_1, the activation type Q4_1 and Q5_1 dot with. As in ggml's CPU backend
// (ggml-cpu-quants.c), Q5_0 dots with Q8_0 activations, while Q4_1 and Q5_1 dot with Q8_1, whose
// s = d * Σq lets a weight block's minimum m contribute m * s without another pass over the
// bytes. Each dot sums one block's integer products exactly, then scales in F32.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

constexpr int k_block = 32;  // every type in this file
constexpr int k_half = k_block / 2;

}  // namespace

// --- Q8_1 activations ---------------------------------------------------------------------

// As ggml's quantize_row_q8_1_ref: scale max|x| / 127, round half away from zero, and s from
// the rounded bytes (so m * s is exactly what the weight's minimum meets in the dot).
void q8_1_from_float_generic(const float* x, void* yv, int64_t n) {
  block_q8_1* y = static_cast<block_q8_1*>(yv);
  for (int64_t b = 0; b < n / k_block; ++b, x += k_block) {
    float amax = 0.0f;
    for (int j = 0; j < k_block; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < k_block; ++j) {
      y[b].qs[j] = int8_t(std::round(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].s = fp32_to_fp16(float(sum) * d);
  }
}

// --- portable dot products -------------------------------------------------------------

float dot_q4_1_q8_1_generic(int64_t n, const void* wv, const void* xv) {
  const block_q4_1* w = static_cast<const block_q4_1*>(wv);
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_block; ++b) {
    int32_t s = 0;
    for (int j = 0; j < k_half; ++j) {
      s += (w[b].qs[j] & 0x0F) * int32_t(x[b].qs[j]);
      s += (w[b].qs[j] >> 4) * int32_t(x[b].qs[j + k_half]);
    }
    sum += (t[w[b].d] * t[x[b].d]) * float(s) + t[w[b].m] * t[x[b].s];
  }
  return sum;
}

// Q5_0 (levels offset by 16, against Q8_0) and Q5_1 (a minimum times Q8_1's s, against Q8_1):
// one loop, inlined into each (the same code as when each was written out).
template <class WBlock, class XBlock>
__attribute__((always_inline)) inline float dot_q5_generic(int64_t n, const void* wv,
                                                           const void* xv) {
  constexpr bool has_min = std::is_same_v<WBlock, block_q5_1>;
  constexpr int32_t offset = has_min ? 0 : 16;
  const WBlock* w = static_cast<const WBlock*>(wv);
  const XBlock* x = static_cast<const XBlock*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_block; ++b) {
    const uint32_t qh = q5_high_bits(w[b].qh);
    int32_t s = 0;
    for (int j = 0; j < k_half; ++j) {
      s += (q5_low(w[b].qs, qh, j) - offset) * int32_t(x[b].qs[j]);
      s += (q5_high(w[b].qs, qh, j) - offset) * int32_t(x[b].qs[j + k_half]);
    }
    if constexpr (has_min) {
      sum += (t[w[b].d] * t[x[b].d]) * float(s) + t[w[b].m] * t[x[b].s];
    } else {
      sum += (t[w[b].d] * t[x[b].d]) * float(s);
    }
  }
  return sum;
}

float dot_q5_0_q8_0_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q5_generic<block_q5_0, block_q8_0>(n, wv, xv);
}

float dot_q5_1_q8_1_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q5_generic<block_q5_1, block_q8_1>(n, wv, xv);
}

// Q8_1 is only ever an activation type; its dot exists so that kernels_for(q8_1) is complete.
float dot_q8_1_q8_1_generic(int64_t n, const void* wv, const void* xv) {
  const block_q8_1* w = static_cast<const block_q8_1*>(wv);
  const block_q8_1* x = static_cast<const block_q8_1*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_block; ++b) {
    int32_t s = 0;
    for (int j = 0; j < k_block; ++j) s += int32_t(w[b].qs[j]) * int32_t(x[b].qs[j]);
    sum += (t[w[b].d] * t[x[b].d]) * float(s);
  }
  return sum;
}

}  // namespace hearth::cpu
