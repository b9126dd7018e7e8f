// F16 and BF16 weights repacked 64 rows at a time for AVX-512 (a packed_format,
// engine/cpu/gemm.h): one register holds the values at one k of 16 rows, and each token's
// activation value at k is broadcast to all 16 lanes, so every lane is one output and no sum
// crosses lanes.
//
// The stored-layout tiles (gemm-float-avx512.cpp) hold 16 values of one row per register and
// add the 16 lanes up at the end of every output. For one token (decoding) that is a horizontal
// sum per row and one row's stream at a time through vec_dot; here 64 rows stream as one, four
// independent chains of multiply-adds. kernels_bench (Zen 4, 5632 x 2048, one thread, the old
// and new binaries alternating three times), F16: 1 token 20-22 -> 24-25 GB/s of weights, 16
// tokens 43-48 -> 49-51 and 128 tokens 42-47 -> 49-53 GMAC/s; BF16 alike. Whole model, TinyLlama
// F16, 2 threads, the reference and the two binaries in turn three times: tg64 16.5 / 15.7 / 17.4
// -> 19.7 / 18.8 / 21.9 t/s (the reference 16.1 / 16.8 / 14.9), pp128 90 / 85 / 93 -> 93 / 88 /
// 100 (two threads are near this machine's multiply-add peak there).
//
// A tile is 4 x 16 rows by 6 tokens: 24 accumulators, 4 weight vectors (4 conversions) and one
// broadcast per token for 24 multiply-adds. 2 x 16 rows by 12 tokens, with 12 broadcasts and 2
// conversions, ran at 50-52 GMAC/s with everything in L1 against 56 for this shape and 57 for the
// stored-layout 4 x 6 tile, on one core whose bare multiply-adds reach 64 (a microbenchmark).
// Prefetching 8 KiB ahead in the group (as the packed Q4_K tiles do) measured no faster on Zen 4
// at 1, 4 or 16 tokens, and slower at 1. On Zen 5 (family 26, 2 threads, 6 alternations) it
// gained at 4 tokens (33-38 -> 35-44 GB/s of weights) and 16 (17-18 -> 18-20), and lost at 1
// (48-53 -> 41-49), so tiles of two or more tokens prefetch and decoding leaves it to the
// hardware. TinyLlama F16 with 16 sequences decoding: 97-114 -> 116-131 t/s (3 alternations).
//
// Each output is the sum of its products in the order of k, one multiply-add after another; the
// products are exact in F32 (F16 weights times F16-rounded activations: 11 x 11 significant bits;
// BF16 times BF16: 8 x 8), so a token's outputs do not depend on the tile or the token count.
#include <cstring>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"

namespace hearth::cpu {
namespace {

constexpr int k_quarters = 4;  // of 16 rows (lanes) each
constexpr int k_group = 16 * k_quarters;
// Tokens per tile: 4 x 6 accumulators and 4 weight vectors of the 32 registers.
constexpr int k_cols = 6;

// A group of 64 rows: for every k, the 64 rows' values (2 bytes each, 128 bytes). Rows past nr
// are zero and compute to zero.
int64_t group_bytes(int64_t n) {
  return n * k_group * 2;
}

void pack(const uint8_t* w, int64_t w_stride, int64_t n, int nr, uint8_t* group) {
  std::memset(group, 0, size_t(group_bytes(n)));
  auto* dst = reinterpret_cast<uint16_t*>(group);
  for (int r = 0; r < nr; ++r) {
    const auto* src = reinterpret_cast<const uint16_t*>(w + r * w_stride);
    for (int64_t k = 0; k < n; ++k) dst[k * k_group + r] = src[k];
  }
}

// Values k of the 16 rows of quarter h, as F32.
template <tensor_type W>
HEARTH_AVX512 inline __m512 step_values(const uint8_t* group, int64_t k, int h) {
  const __m256i v =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + k * 2 * k_group + h * 32));
  if constexpr (W == tensor_type::f16) {
    return _mm512_cvtph_ps(v);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
  }
}

// The tiles of one weight type, for packed_tile_dispatch (engine/cpu/gemm.h): run<C> computes C
// tokens against one group, y[c * ldy + r] for r < nr.
template <tensor_type W>
struct tiles {
  template <int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, const uint8_t* xv, int64_t x_stride,
                                float* y, int64_t ldy, int nr) {
    constexpr int H = k_quarters;
    const float* x[C];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) x[c] = reinterpret_cast<const float*>(xv + c * x_stride);
    __m512 acc[H][C];
#pragma GCC unroll 16
    for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) acc[h][c] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; ++k) {
      if constexpr (C > 1) prefetch_l2(w + k * 2 * k_group + k_prefetch_ahead, 2 * k_group);
      __m512 v[H];
#pragma GCC unroll 16
      for (int h = 0; h < H; ++h) v[h] = step_values<W>(w, k, h);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        const __m512 xc = _mm512_set1_ps(x[c][k]);
#pragma GCC unroll 16
        for (int h = 0; h < H; ++h) acc[h][c] = _mm512_fmadd_ps(v[h], xc, acc[h][c]);
      }
    }
    store_group_rows(acc, y, ldy, nr);
  }
};

// The packed format of weight type W: activations as the stored-layout tiles take them (F32 rows
// rounded as the reference rounds them), so both kinds of tile share one conversion.
template <tensor_type W>
const packed_format* format() {
  static const packed_format f = [] {
    const gemm_kernel* stored = gemm_kernel_float_avx512(W);
    return packed_format{k_group, group_bytes, pack,
                         gemm_kernel{k_group, k_cols, stored->x_row_bytes, stored->x_from_float,
                                     packed_tile_dispatch<tiles<W>, k_cols>}};
  }();
  return &f;
}

}  // namespace

const packed_format* packed_format_float_avx512(tensor_type t) {
  switch (t) {
    case tensor_type::f16:
      return format<tensor_type::f16>();
    case tensor_type::bf16:
      return format<tensor_type::bf16>();
    default:
      return nullptr;
  }
}

}  // namespace hearth::cpu
