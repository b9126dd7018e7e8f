// The K-quants (Q4_K, Q5_K, Q6_K) and their activation type Q8_K: the Q8_K quantizer and dot
// products of weight super-blocks with Q8_K activations. Each dot sums the integer products of
// one super-block exactly, then scales once in F32, as ggml's CPU backend does
// (ggml-cpu-quants.c); block layouts are in engine/io/tensor-type.h, dequantization in
// engine/io/dequantize.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

constexpr int k_chunk = 64;  // Q4_K/Q5_K: 64 values share 32 bytes of nibbles

// ggml's nearest_int: round half to even through the float mantissa (|v| < 2^22).
inline int nearest_int(float v) {
  const float shifted = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &shifted, 4);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

// --- Q8_K activations ---------------------------------------------------------------------

// quantize_row_q8_K_ref: the value of largest magnitude (sign kept) becomes -127.
void q8_k_from_float(const float* x, void* yv, int64_t n) {
  block_q8_k* y = static_cast<block_q8_k*>(yv);
  for (int64_t b = 0; b < n / k_qk_k; ++b, x += k_qk_k) {
    float max = 0, amax = 0;
    for (int i = 0; i < k_qk_k; ++i) {
      const float ax = std::fabs(x[i]);
      if (ax > amax) amax = ax, max = x[i];
    }
    if (amax == 0) {
      std::memset(&y[b], 0, sizeof(block_q8_k));
      continue;
    }
    const float iscale = -127.f / max;
    for (int i = 0; i < k_qk_k; ++i) y[b].qs[i] = int8_t(std::min(127, nearest_int(iscale * x[i])));
    for (int j = 0; j < k_qk_k / 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
      y[b].bsums[j] = int16_t(sum);
    }
    y[b].d = 1 / iscale;
  }
}

// --- portable dot products ----------------------------------------------------------------

// Q4_K and Q5_K share their layout of scales, mins and low nibbles; Q5_K adds a fifth bit per
// value from qh (bit 2c of qh[l] for the low nibbles of chunk c, bit 2c + 1 for the high).
template <typename Block>
float dot_q45_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  constexpr bool k_fifth_bit = std::is_same_v<Block, block_q5_k>;
  const Block* w = static_cast<const Block*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    uint8_t sm[16];
    k_scales_mins(w[b].scales, sm);
    int32_t sumi = 0;
    for (int c = 0; c < k_qk_k / k_chunk; ++c) {
      const uint8_t* q = w[b].qs + 32 * c;
      const int8_t* q8 = x[b].qs + k_chunk * c;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        int ql = q[l] & 0xF, qh = q[l] >> 4;
        if constexpr (k_fifth_bit) {
          ql |= ((w[b].qh[l] >> (2 * c)) & 1) << 4;
          qh |= ((w[b].qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        lo += ql * q8[l];
        hi += qh * q8[32 + l];
      }
      sumi += sm[2 * c] * lo + sm[2 * c + 1] * hi;
    }
    int32_t summ = 0;  // Σ min[s] · Σ q8 over sub-block s
    for (int j = 0; j < k_qk_k / 16; ++j) summ += sm[8 + j / 2] * x[b].bsums[j];
    const float d = x[b].d * t[w[b].d], dmin = x[b].d * t[w[b].dmin];
    sum += d * float(sumi) - dmin * float(summ);
  }
  return sum;
}

float dot_q4_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q45_k_q8_k_generic<block_q4_k>(n, wv, xv);
}

float dot_q5_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  return dot_q45_k_q8_k_generic<block_q5_k>(n, wv, xv);
}

float dot_q6_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  const block_q6_k* w = static_cast<const block_q6_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  const auto& t = fp16_table();
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    int32_t sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = w[b].ql + 64 * h;
      const uint8_t* qh = w[b].qh + 32 * h;
      const int8_t* sc = w[b].scales + 8 * h;
      const int8_t* q8 = x[b].qs + 128 * h;
      for (int g = 0; g < 4; ++g) {  // 32 values: two sub-blocks of 16
        const uint8_t* low = ql + 32 * (g & 1);
        const int shift = 4 * (g >> 1);
        for (int k = 0; k < 2; ++k) {
          int32_t s = 0;
          for (int l = 16 * k; l < 16 * k + 16; ++l) {
            const int q = (((low[l] >> shift) & 0xF) | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
            s += q * q8[32 * g + l];
          }
          sumi += sc[2 * g + k] * s;
        }
      }
    }
    sum += x[b].d * t[w[b].d] * float(sumi);
  }
  return sum;
}

float dot_q8_k_q8_k_generic(int64_t n, const void* wv, const void* xv) {
  const block_q8_k* w = static_cast<const block_q8_k*>(wv);
  const block_q8_k* x = static_cast<const block_q8_k*>(xv);
  float sum = 0;
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    int32_t s = 0;
    for (int i = 0; i < k_qk_k; ++i) s += int32_t(w[b].qs[i]) * int32_t(x[b].qs[i]);
    sum += w[b].d * x[b].d * float(s);
  }
  return sum;
}

}  // namespace hearth::cpu
