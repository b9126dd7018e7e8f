// AVX-512 VNNI tile kernels for the 32-value block types Q8_0 and Q4_0. Activations are
// quantized to 8-bit blocks exactly as the reference engine's Q8_0 (scale max|x|/127, rounded
// half away from zero), then stored unsigned (x + 128) with their scales apart, so one 64-byte
// load holds two blocks. vpdpbusd multiplies the unsigned activation bytes with the signed weight
// bytes; the 128 · Σw it adds is taken off by starting each sum at -128 · Σw, which depends on
// the weights alone and is computed once per row and block pair for all tokens of the tile.
// Where the backend packs weights (gemm-q8-0-q4-0-x32-avx512.cpp) these serve nothing in a
// model; they remain the kernels of HEARTH_CPU_NO_PACK=1, which compares the two layouts.
#include <array>
#include <cstring>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"

namespace hearth::cpu {
namespace {

constexpr int k_rows = 2;
constexpr int k_cols = 6;
constexpr int64_t k_block = 32;

// Activation row: n_pad = n rounded up to 64 unsigned bytes, then n_pad / 32 F32 scales.
int64_t padded(int64_t n) {
  return (n + 63) / 64 * 64;
}

int64_t x_row_bytes(int64_t n) {
  return (padded(n) + padded(n) / k_block * 4 + 63) / 64 * 64;
}

HEARTH_AVX512 void x_from_float(const float* x, void* yv, int64_t n) {
  uint8_t* q = static_cast<uint8_t*>(yv);
  float* d = reinterpret_cast<float*>(q + padded(n));
  int64_t b = 0;
  for (; b < n / k_block; ++b) {
    const __m256i v = quantize_q8_0_block(x + b * k_block, &d[b]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * k_block),
                        _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80))));
  }
  for (; b < padded(n) / k_block; ++b) {
    std::memset(q + b * k_block, 0x80, k_block);
    d[b] = 0;
  }
}

// Two weight blocks (b, b + 1) as signed bytes in one register, and their scales per lane
// (lanes 0-7 cover block b's bytes in vpdpbusd's sums, lanes 8-15 block b + 1). When only one
// block is left, the second half is zero.
struct pair {
  __m512i q;
  __m512 d;
};

HEARTH_AVX512 inline __m512 scales_of(float d0, float d1) {
  return _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

HEARTH_AVX512 inline pair load_q8_0(const uint8_t* row, int64_t b, bool two) {
  const auto* blk = reinterpret_cast<const block_q8_0*>(row) + b;
  const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
  if (!two) return {_mm512_zextsi256_si512(q0), scales_of(_cvtsh_ss(blk[0].d), 0.0f)};
  const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs));
  return {_mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1),
          scales_of(_cvtsh_ss(blk[0].d), _cvtsh_ss(blk[1].d))};
}

// Q4_0: value j of a block is the low nibble of qs[j] (j < 16) or the high nibble of
// qs[j - 16], minus 8.
HEARTH_AVX512 inline pair load_q4_0(const uint8_t* row, int64_t b, bool two) {
  const auto* blk = reinterpret_cast<const block_q4_0*>(row) + b;
  const __m128i n0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
  const __m128i n1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs))
                         : _mm_set1_epi8(0x08 | 0x80);
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(n0), n1, 1);
  const __m256i m = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(v, m);                        // [b lo | b+1 lo]
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);  // [b hi | b+1 hi]
  const __m512i idx = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i q =
      _mm512_permutex2var_epi64(_mm512_castsi256_si512(lo), idx, _mm512_castsi256_si512(hi));
  // A missing second block was filled with nibbles of 8, which become 0 here.
  return {_mm512_sub_epi8(q, _mm512_set1_epi8(8)),
          scales_of(_cvtsh_ss(blk[0].d), two ? _cvtsh_ss(blk[1].d) : 0.0f)};
}

template <tensor_type W>
HEARTH_AVX512 inline pair load_pair(const uint8_t* row, int64_t b, bool two) {
  if constexpr (W == tensor_type::q8_0) {
    return load_q8_0(row, b, two);
  } else {
    return load_q4_0(row, b, two);
  }
}

// The fixed-size tiles of one weight type, for tile_dispatch (engine/cpu/gemm.h).
template <tensor_type W>
struct tiles {
  template <int R, int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x,
                                int64_t x_stride, float* y, int64_t ldy) {
    const int64_t nb = n / k_block;
    const int64_t x_scales = padded(n);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i idx_pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
      const bool two = b + 1 < nb;
      __m512i wq[R], bias[R];
      __m512 wd[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const pair p = load_pair<W>(w + r * w_stride, b, two);
        wq[r] = p.q;
        wd[r] = p.d;
        const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, p.q);
        bias[r] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
      }
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const uint8_t* xc = x + c * x_stride;
        const __m512i xq = _mm512_loadu_si512(xc + b * k_block);
        double d2;
        std::memcpy(&d2, xc + x_scales + b * 4, 8);  // scales b and b + 1 (padding is 0)
        const __m512 xd =
            _mm512_permutexvar_ps(idx_pair, _mm512_castps128_ps512(_mm_castpd_ps(_mm_set_sd(d2))));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i s = _mm512_dpbusd_epi32(bias[r], xq, wq[r]);
          acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd[r], xd), acc[r][c]);
        }
      }
    }
    store_tile_sums<R, C>(acc, y, ldy);
  }
};

template <tensor_type W>
constexpr auto tile_any = tile_dispatch<tiles<W>, k_rows, k_cols>;

const gemm_kernel k_q8_0{k_rows, k_cols, x_row_bytes, x_from_float, tile_any<tensor_type::q8_0>};
const gemm_kernel k_q4_0{k_rows, k_cols, x_row_bytes, x_from_float, tile_any<tensor_type::q4_0>};

}  // namespace

const gemm_kernel* gemm_kernel_q8_avx512(tensor_type t) {
  return gemm_kernel_find(t, {{tensor_type::q8_0, &k_q8_0}, {tensor_type::q4_0, &k_q4_0}});
}

}  // namespace hearth::cpu
