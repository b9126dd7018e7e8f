// Q8_0 and Q4_0 weights repacked 32 rows at a time for AVX-512 VNNI (a packed_format,
// engine/cpu/gemm.h), on the plan of gemm-q45-k-x16-avx512.cpp.
//
// The stored-layout kernel (gemm-q8-avx512.cpp) holds two blocks of one row per register, so its
// lane sums are parts of one output and are added across lanes at the end of every output, and it
// computes 128 · Σw again for every row, block pair and tile. Here one 32-bit lane is one row: a
// 64-byte load holds 4 values of each of 16 rows, and vpdpbusd multiplies them by 4 activation
// bytes broadcast to every lane, so one instruction does 64 products, each lane's sum is one row's
// block, and 16 outputs are written with one store. A group is two such halves of 16 rows, so
// each broadcast activation word feeds two vpdpbusd: with one half (16 rows), the broadcasts cost
// about a tenth of the throughput (165 against 182 GMAC/s, one core, the group in L2).
//
// vpdpbusd wants one unsigned operand. The weights are made unsigned once, at packing: Q8_0's as
// w + 128, Q4_0's nibbles as stored (w + 8). The activations stay the signed operand, quantized as
// the reference quantizes them, and each activation block carries -off · Σx, which is where the
// block's sum starts: Σ(w + off) · x - off · Σx = Σw · x, exact in 32 bits. So the weights take
// the bytes they take stored (34 and 18 per row and block) and the tile does no work per row for
// the offset. Per block the integer sum is converted and multiplied by d_w · d_x and added up in
// F32, as the reference's vec_dot does, the 16 rows' F16 scales converted by one vcvtph2ps.
#include <cstring>
#include <type_traits>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"

namespace hearth::cpu {
namespace {

constexpr int k_halves = 2;  // of 16 rows (lanes) each; 3 or 4 measured no faster
constexpr int k_group = 16 * k_halves;
// Tokens per tile: 2 x 4 sums and 2 x 4 accumulators in registers; 6 measured the same.
constexpr int k_cols = 4;
constexpr int64_t k_block = 32;

// A group of 32 rows, block after block: each block's values, then its scales, so the group is
// one stream and each block's values start at a multiple of 64 bytes (the scales take 64). With
// the scales apart at the group's end, a second stream, one token streamed less: kernels_bench,
// 5632 x 2048, one thread, 1 token, three alternations: Q8_0 16.7 / 20.4 / 17.2 -> 23.2 / 23.2 /
// 21.5 GB/s, Q4_0 15.8 / 15.3 / 18.6 -> 24.1 / 24.7 / 21.7; 4 tokens Q8_0 19.4 / 16.7 / 17.2 ->
// 24.0 / 23.8 / 21.2. The products are the same bit for bit.
//   values: [block][step j][row][4 bytes]. Q8_0: 8 steps, values 4j .. 4j + 3 of the row, + 128.
//           Q4_0: 4 steps, the row's stored bytes 4j .. 4j + 3, whose low nibbles are values
//           4j.. and high nibbles values 16 + 4j.. (steps 4 + j for the kernel).
//   scales: [row] F16, after the block's values.
// Rows 0-15 and 16-31 are the two halves: each is one 64-byte load per step. Rows past nr are
// zero bytes, scale 0 included, so they compute to 0.
template <tensor_type W>
constexpr int k_steps = W == tensor_type::q8_0 ? 8 : 4;

// A block's values: k_steps x 4 bytes of every row.
template <tensor_type W>
constexpr int64_t k_value_bytes = W == tensor_type::q8_0 ? 32 * k_group : 16 * k_group;

constexpr int64_t k_scale_bytes = 2 * k_group;
static_assert(k_scale_bytes % 64 == 0, "groups would need padding to stay 64-byte aligned");

// One block of the group: its values and its scales.
template <tensor_type W>
constexpr int64_t k_block_bytes = k_value_bytes<W> + k_scale_bytes;

template <tensor_type W>
int64_t group_bytes(int64_t n) {
  return n / k_block * k_block_bytes<W>;
}

template <tensor_type W>
void pack(const uint8_t* w, int64_t w_stride, int64_t n, int nr, uint8_t* group) {
  using block = std::conditional_t<W == tensor_type::q8_0, block_q8_0, block_q4_0>;
  const uint32_t flip = W == tensor_type::q8_0 ? 0x80808080u : 0;  // signed -> + 128
  const int64_t nb = n / k_block;
  std::memset(group, 0, size_t(group_bytes<W>(n)));
  for (int r = 0; r < nr; ++r) {
    const auto* src = reinterpret_cast<const block*>(w + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block_start = group + b * k_block_bytes<W>;
      reinterpret_cast<uint16_t*>(block_start + k_value_bytes<W>)[r] = src[b].d;
      for (int j = 0; j < k_steps<W>; ++j) {
        uint32_t v;
        std::memcpy(&v, src[b].qs + 4 * j, 4);
        v ^= flip;
        std::memcpy(block_start + (j * k_group + r) * 4, &v, 4);
      }
    }
  }
}

// One block of activations: the reference's Q8_0 values and scale, and the start of the block's
// sum, -off · Σx (off = 128 for Q8_0 weights, 8 for Q4_0).
struct x_block {
  int8_t qs[k_block];
  float d;
  int32_t start;
};

int64_t x_row_bytes(int64_t n) {
  return n / k_block * int64_t(sizeof(x_block));
}

template <int Off>
HEARTH_AVX512 void x_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<x_block*>(yv);
  for (int64_t b = 0; b < n / k_block; ++b) {
    const __m256i q = quantize_q8_0_block(x + b * k_block, &y[b].d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), q);
    // Σx from the unsigned bytes x + 128, whose sums vpsadbw forms in four 64-bit lanes.
    const __m256i s =
        _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8(char(0x80))), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    const int32_t sum = int32_t(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 128 * k_block;
    y[b].start = -Off * sum;
  }
}

// Values 4j .. 4j + 3 of a block, unsigned, for the 16 rows of half h. For Q4_0, steps j and
// j + 4 are the two nibbles of one load (read again from L1 rather than kept in registers).
template <tensor_type W>
HEARTH_AVX512 inline __m512i step_values(const uint8_t* values, int j, int h) {
  if constexpr (W == tensor_type::q8_0) {
    return _mm512_loadu_si512(values + (j * k_halves + h) * 64);
  } else {
    const __m512i v = _mm512_loadu_si512(values + (j % 4 * k_halves + h) * 64);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    return _mm512_and_si512(j < 4 ? v : _mm512_srli_epi16(v, 4), low4);
  }
}

// C tokens against one group: y[c * ldy + r] for r < nr.
template <tensor_type W, int C>
HEARTH_AVX512 void tile_c(int64_t n, const uint8_t* w, const uint8_t* x, int64_t x_stride, float* y,
                          int64_t ldy, int nr) {
  constexpr int H = k_halves;
  const int64_t nb = n / k_block;
  __m512 acc[H][C];
#pragma GCC unroll 8
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[h][c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* values = w + b * k_block_bytes<W>;
    const auto* scales = reinterpret_cast<const uint16_t*>(values + k_value_bytes<W>);
    const x_block* xb[C];
    __m512i isum[H][C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      xb[c] = reinterpret_cast<const x_block*>(x + c * x_stride) + b;
      const __m512i start = _mm512_set1_epi32(xb[c]->start);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) isum[h][c] = start;
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i v[H];
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) v[h] = step_values<W>(values, j, h);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const __m512i xc = broadcast_i32(xb[c]->qs + 4 * j);
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) isum[h][c] = _mm512_dpbusd_epi32(isum[h][c], v[h], xc);
      }
    }
    __m512 d[H];
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h)
      d[h] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 16 * h)));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m512 dx = _mm512_set1_ps(xb[c]->d);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h)
        acc[h][c] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[h][c]), _mm512_mul_ps(d[h], dx), acc[h][c]);
    }
  }
  store_group_rows(acc, y, ldy, nr);
}

// The tiles of one weight type, for packed_tile_dispatch (engine/cpu/gemm.h).
template <tensor_type W>
struct tiles {
  template <int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, const uint8_t* x, int64_t x_stride,
                                float* y, int64_t ldy, int nr) {
    tile_c<W, C>(n, w, x, x_stride, y, ldy, nr);
  }
};

template <tensor_type W, int Off>
constexpr packed_format k_x32{k_group, group_bytes<W>, pack<W>,
                              gemm_kernel{k_group, k_cols, x_row_bytes, x_from_float<Off>,
                                          packed_tile_dispatch<tiles<W>, k_cols>}};

}  // namespace

const packed_format* packed_format_q8_avx512(tensor_type t) {
  switch (t) {
    case tensor_type::q8_0:
      return &k_x32<tensor_type::q8_0, 128>;
    case tensor_type::q4_0:
      return &k_x32<tensor_type::q4_0, 8>;
    default:
      return nullptr;
  }
}

}  // namespace hearth::cpu
