// AVX-512 kernels for F32, F16 and BF16 weights: tiles, for every token count. The tiles'
// activations are F32 values rounded to the weight's type first (the reference engine converts them
// to F16/BF16 and multiplies exactly in F32; rounding once up front gives the same products without
// a conversion in the inner loop). The inner loop converts 16 weights of each row to F32 once and
// multiplies them with 16 values of each token: NR + NC loads feed NR × NC fused multiply-adds.
// Where the backend packs weights (gemm-f16-x64-avx512.cpp) the F16 and BF16 tiles serve nothing
// in a model; they remain the kernels of HEARTH_CPU_NO_PACK=1. F32's tile still serves.
#include <array>
#include <cstring>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"

namespace hearth::cpu {
namespace {

constexpr int k_rows = 4;
constexpr int k_cols = 6;

template <tensor_type W>
HEARTH_AVX512 inline __m512 load_w(const uint8_t* p, __mmask16 m) {
  if constexpr (W == tensor_type::f32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (W == tensor_type::f16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  } else {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
}

template <tensor_type W>
constexpr int64_t w_elem_bytes = W == tensor_type::f32 ? 4 : 2;

// The fixed-size tiles of one weight type, for tile_dispatch (engine/cpu/gemm.h).
template <tensor_type W>
struct tiles {
  template <int R, int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x,
                                int64_t x_stride, float* y, int64_t ldy) {
    __m512 acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    constexpr int64_t eb = w_elem_bytes<W>;
    // The full-width loop and the masked tail are the same step; written out twice because gcc
    // keeps the accumulators in memory when a lambda captures them.
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
      __m512 wv[R];
      // The next tile's rows (usually this thread's next work item) are fetched into L2 while
      // this one computes. With few tokens per row (several sequences decoding) the hardware
      // prefetchers alone left the product well short of memory speed: on Zen 4, F16, 5632x2048,
      // 4 tokens, 0.95 -> 0.70 ms, the same as 1 token; 16 tokens 2.13 -> 1.78 ms (kernels_bench).
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * w_stride + k * eb), _MM_HINT_T1);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wv[r] = load_w<W>(w + r * w_stride + k * eb, 0xffff);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 xv = _mm512_loadu_ps(x + c * x_stride + k * 4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
      }
    }
    if (k < n) {
      const __mmask16 m = __mmask16((1u << (n - k)) - 1);
      __m512 wv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) wv[r] = load_w<W>(w + r * w_stride + k * eb, m);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x + c * x_stride + k * 4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], xv, acc[r][c]);
      }
    }
    store_tile_sums<R, C>(acc, y, ldy);
  }
};

template <tensor_type W>
constexpr auto tile_any = tile_dispatch<tiles<W>, k_rows, k_cols>;

// Rows padded to whole cache lines, and one line more when that is a multiple of 4 KiB. A tile
// reads its C activation rows at the same offset, and rows a multiple of 4 KiB apart fall in the
// same L1 set (the likely cause; not checked with cache counters, which this machine's perf
// lacks). F32 weights at n = 2048 (8 KiB rows, as the activations') went from 34-37 to 45-47
// GMAC/s on one thread at 128 tokens (kernels_bench, 5632 x 2048, three alternations); F16 and
// BF16 (4 KiB weight rows) measured the same either way.
int64_t x_row_bytes(int64_t n) {
  const int64_t b = (n * 4 + 63) / 64 * 64;
  return b % 4096 == 0 ? b + 64 : b;
}

void x_f32(const float* x, void* y, int64_t n) {
  std::memcpy(y, x, size_t(n) * 4);
}

HEARTH_AVX512 void x_f16_rounded(const float* x, void* yv, int64_t n) {
  float* y = static_cast<float*>(yv);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(h));
  }
}

void x_bf16_rounded(const float* x, void* yv, int64_t n) {
  float* y = static_cast<float*>(yv);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

const gemm_kernel k_f32{k_rows, k_cols, x_row_bytes, x_f32, tile_any<tensor_type::f32>};
const gemm_kernel k_f16{k_rows, k_cols, x_row_bytes, x_f16_rounded, tile_any<tensor_type::f16>};
const gemm_kernel k_bf16{k_rows, k_cols, x_row_bytes, x_bf16_rounded, tile_any<tensor_type::bf16>};

}  // namespace

const gemm_kernel* gemm_kernel_float_avx512(tensor_type t) {
  return gemm_kernel_find(
      t, {{tensor_type::f32, &k_f32}, {tensor_type::f16, &k_f16}, {tensor_type::bf16, &k_bf16}});
}

}  // namespace hearth::cpu
