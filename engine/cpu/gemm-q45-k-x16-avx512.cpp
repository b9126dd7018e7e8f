// Q4_K and Q5_K weights repacked 16 rows at a time for AVX-512 VNNI (a packed_format,
// engine/cpu/gemm.h).
//
// The stored Q4_K kernel (gemm-k-avx512.cpp) unpacks each row's scales and mins from their 6-bit
// fields for every super-block it reads, and multiplies in two steps (vpmaddubsw, then vpdpwssd
// with the scales) because one row's 64 values span two sub-blocks. Here one 32-bit lane is one
// row: a 64-byte load holds 4 bytes (8 values) of each of 16 rows, and vpdpbusd multiplies their
// nibbles by 4 activation bytes broadcast to every lane, so one instruction does 64 products and
// each lane's sum stays within one sub-block. After a sub-block's 8 steps the sums are multiplied
// by the sub-block scales, which sit pre-expanded as one byte per row; the mins multiply the
// activations' sub-block sums, two sub-blocks per vpdpwssd. All of it is integer arithmetic, exact
// as the reference's; the float part (d · dx per super-block, the mins' dmin · dx) is the
// reference's too. Decoding reads 148 bytes per row and super-block instead of 144.
//
// Q5_K is Q4_K with a fifth bit per value. Its bits are regrouped per step: one byte per row and
// step holds the fifth bits of that step's 8 values (bits 0-3 the low nibbles', 4-7 the high
// ones'), four steps in one 64-byte load; vpshufb spreads a step's byte over its row's lane,
// vptestmb picks each value's bit, and a masked add puts 16 into the value. 180 bytes per row and
// super-block instead of 176.
#include <cstring>
#include <type_traits>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/vec-dot-kernels.h"
#include "engine/io/cpu-features.h"

namespace hearth::cpu {
namespace {

constexpr int k_group = 16;
constexpr int k_cols = 4;

// One super-block (256 values) of 16 rows, each 64-value chunk's bytes contiguous in the order
// the kernel reads them (one read stream for decoding).
template <bool Q5>
struct chunk_x16 {
  // [step j][row]: the row's Q4_K/Q5_K bytes 32p + 4j .. 32p + 4j + 3 (chunk p), whose low
  // nibbles are values 64p + 4j.. (sub-block 2p) and high nibbles 64p + 32 + 4j.. (2p + 1).
  uint8_t qs[8][k_group][4];
  uint8_t scales[2][k_group];  // [sub-block 2p, 2p + 1][row]
};
template <>
struct chunk_x16<true> {
  uint8_t qs[8][k_group][4];
  // Q5_K: [steps 4h .. 4h + 3][row][step mod 4]: bit k the fifth bit of the step's low-nibble
  // value k, bit 4 + k of its high-nibble value k.
  uint8_t qh[2][k_group][4];
  uint8_t scales[2][k_group];
};

template <bool Q5>
struct k_x16 {
  uint16_t d[k_group];          // F16 per row
  uint16_t dmin[k_group];       // F16 per row
  uint8_t mins[4][k_group][2];  // [sub-block pair q][row]: the mins of sub-blocks 2q and 2q + 1
  chunk_x16<Q5> p[4];
};
static_assert(sizeof(k_x16<false>) == k_group * 148);
static_assert(sizeof(k_x16<true>) == k_group * 180);

// One super-block of activations: Q8_K's values and scale (the reference's rounding), and the
// sums of each 32-value sub-block for the mins.
struct x_block {
  int8_t qs[k_qk_k];
  int16_t bsum32[8];
  float d;
};

template <bool Q5>
int64_t group_bytes(int64_t n) {
  return n / k_qk_k * int64_t(sizeof(k_x16<Q5>));
}

template <bool Q5>
void pack(const uint8_t* w, int64_t w_stride, int64_t n, int nr, uint8_t* group) {
  using block = std::conditional_t<Q5, block_q5_k, block_q4_k>;
  auto* dst = reinterpret_cast<k_x16<Q5>*>(group);
  const int64_t nb = n / k_qk_k;
  std::memset(group, 0, size_t(group_bytes<Q5>(n)));
  for (int r = 0; r < nr; ++r) {
    const auto* src = reinterpret_cast<const block*>(w + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      k_x16<Q5>& g = dst[b];
      g.d[r] = src[b].d;
      g.dmin[r] = src[b].dmin;
      uint8_t sm[16];
      k_scales_mins(src[b].scales, sm);
      for (int s = 0; s < 8; ++s) {
        g.p[s / 2].scales[s % 2][r] = sm[s];
        g.mins[s / 2][r][s % 2] = sm[8 + s];
      }
      for (int p = 0; p < 4; ++p) {
        for (int j = 0; j < 8; ++j) {
          std::memcpy(g.p[p].qs[j][r], src[b].qs + 32 * p + 4 * j, 4);
          if constexpr (Q5) {
            // Value 64p + l has its fifth bit at bit 2p of qh[l], value 64p + 32 + l at 2p + 1.
            uint8_t bits = 0;
            for (int k = 0; k < 4; ++k) {
              const uint8_t h = src[b].qh[4 * j + k];
              bits =
                  uint8_t(bits | ((h >> (2 * p)) & 1) << k | ((h >> (2 * p + 1)) & 1) << (4 + k));
            }
            g.p[p].qh[j / 4][r][j % 4] = bits;
          }
        }
      }
    }
  }
}

int64_t x_row_bytes(int64_t n) {
  return n / k_qk_k * int64_t(sizeof(x_block));
}

HEARTH_AVX512 void x_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<x_block*>(yv);
  for (int64_t b = 0; b < n / k_qk_k; ++b) {
    block_q8_k q;
    quantize_q8_k_avx512(x + b * k_qk_k, &q, k_qk_k);
    std::memcpy(y[b].qs, q.qs, k_qk_k);
    for (int s = 0; s < 8; ++s) y[b].bsum32[s] = int16_t(q.bsums[2 * s] + q.bsums[2 * s + 1]);
    y[b].d = q.d;
  }
}

// C tokens against one group: y[c * ldy + r] for r < nr.
template <bool Q5>
struct tiles {
  template <int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, const uint8_t* x, int64_t x_stride,
                                float* y, int64_t ldy, int nr) {
    const auto* blk = reinterpret_cast<const k_x16<Q5>*>(w);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    // Q5_K: vpshufb indices that copy byte s of each 32-bit lane to all four of its bytes are
    // spread(s) = (4 (lane mod 4) + s) in every byte; byte k tests bit k (low nibbles) or 4 + k.
    const __m512i lane4 = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
    const __m512i bit_lo = _mm512_set1_epi32(0x08040201),
                  bit_hi = _mm512_set1_epi32(int(0x80402010));
    const __m512i k16 = _mm512_set1_epi8(16);
    __m512 acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    const bool prefetch = C > 1 || cpu_decode_prefetch();
    for (int64_t b = 0; b < n / k_qk_k; ++b) {
      const k_x16<Q5>& g = blk[b];
      if (prefetch) prefetch_l2(reinterpret_cast<const uint8_t*>(&g) + k_prefetch_ahead, sizeof(g));
      const x_block* xb[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) xb[c] = reinterpret_cast<const x_block*>(x + c * x_stride) + b;
      __m512i isum[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        __m512i lo_sum[C], hi_sum[C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) lo_sum[c] = hi_sum[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m512i v = _mm512_loadu_si512(g.p[p].qs[j]);
          __m512i lo = _mm512_and_si512(v, low4);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          if constexpr (Q5) {
            const __m512i bits =
                _mm512_shuffle_epi8(_mm512_loadu_si512(g.p[p].qh[j / 4]),
                                    _mm512_add_epi8(lane4, _mm512_set1_epi8(char(j % 4))));
            lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(bits, bit_lo), lo, k16);
            hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(bits, bit_hi), hi, k16);
          }
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            lo_sum[c] =
                _mm512_dpbusd_epi32(lo_sum[c], lo, broadcast_i32(xb[c]->qs + 64 * p + 4 * j));
            hi_sum[c] =
                _mm512_dpbusd_epi32(hi_sum[c], hi, broadcast_i32(xb[c]->qs + 64 * p + 32 + 4 * j));
          }
        }
        const __m512i sc_lo = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.p[p].scales[0])));
        const __m512i sc_hi = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.p[p].scales[1])));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c)
          isum[c] =
              _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(lo_sum[c], sc_lo),
                                                         _mm512_mullo_epi32(hi_sum[c], sc_hi)));
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.d)));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.dmin)));
      __m512i mins[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
        mins[q] =
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.mins[q])));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q)
          msum = _mm512_dpwssd_epi32(msum, mins[q], broadcast_i32(xb[c]->bsum32 + 2 * q));
        const __m512 dx = _mm512_set1_ps(xb[c]->d);
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_mul_ps(d, dx), acc[c]);
        acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc[c]);
      }
    }
    const __mmask16 rows = __mmask16((1u << nr) - 1);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, acc[c]);
  }
};

template <bool Q5>
const packed_format k_x16_format{k_group, group_bytes<Q5>, pack<Q5>,
                                 gemm_kernel{k_group, k_cols, x_row_bytes, x_from_float,
                                             packed_tile_dispatch<tiles<Q5>, k_cols>}};

}  // namespace

const packed_format* packed_format_q4_k_avx512() {
  return &k_x16_format<false>;
}

const packed_format* packed_format_q5_k_avx512() {
  return &k_x16_format<true>;
}

}  // namespace hearth::cpu
