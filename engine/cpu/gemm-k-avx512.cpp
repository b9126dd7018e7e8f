// AVX-512 VNNI tile kernels for the K-quants (Q4_K, Q5_K, Q6_K). Activations are quantized to
// Q8_K exactly as the reference engine does (engine/cpu/vec-dot-k.cpp) and their bytes stored
// unsigned (x + 128). Each super-block of 256 weights is unpacked once per tile row into four
// registers of 64 signed values with their sub-block scales spread over 16-bit lanes; then for
// every token vpmaddubsw multiplies activation and weight bytes in pairs and vpdpwssd applies
// the scales and accumulates. The 128 · Σ scale · w that the unsigned activations add depends on
// the weights alone: it is computed once per row and super-block and starts every token's sum.
// Q4_K/Q5_K's mins multiply the activation sums Q8_K carries (bsums), as the reference does.
// Where the backend packs these types (gemm-q45-k-x16-avx512.cpp, gemm-q6-k-x16-avx512.cpp) the
// tiles serve products only with HEARTH_CPU_NO_PACK=1, which compares the two layouts.
#include <array>
#include <cstring>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {

// quantize_row_q8_K_ref (engine/cpu/vec-dot-k.cpp) on 16 lanes, bit for bit: the first value of
// largest magnitude becomes -127, the rest round half to even (as nearest_int), bsums are the
// sums of each 16 quantized values.
HEARTH_AVX512 void quantize_q8_k_avx512(const float* x, block_q8_k* y, int64_t n) {
  for (int64_t b = 0; b < n / k_qk_k; ++b, x += k_qk_k) {
    __m512 vmax = _mm512_setzero_ps();
    for (int i = 0; i < k_qk_k; i += 16)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0) {
      std::memset(&y[b], 0, sizeof(block_q8_k));
      continue;
    }
    float max = 0;
    for (int i = 0; i < k_qk_k; i += 16) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + i)),
                                               _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        max = x[i + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int g = 0; g < k_qk_k / 16; ++g) {
      const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vs);
      __m512i q = _mm512_cvtps_epi32(
          _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      y[b].bsums[g] = int16_t(_mm512_reduce_add_epi32(q));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
    }
    y[b].d = 1 / iscale;
  }
}

namespace {

constexpr int k_rows = 1;
constexpr int k_cols = 8;

int64_t x_row_bytes(int64_t n) {
  return n / k_qk_k * int64_t(sizeof(block_q8_k));
}

// The activations in Q8_K (quantize_q8_k_avx512), their bytes then stored unsigned (x + 128).
HEARTH_AVX512 void x_from_float(const float* x, void* yv, int64_t n) {
  auto* y = static_cast<block_q8_k*>(yv);
  quantize_q8_k_avx512(x, y, n);
  const __m512i k128 = _mm512_set1_epi8(char(0x80));
  for (int64_t b = 0; b < n / k_qk_k; ++b)
    for (int q = 0; q < 4; ++q) {
      int8_t* p = y[b].qs + 64 * q;
      _mm512_storeu_si512(p, _mm512_xor_si512(_mm512_loadu_si512(p), k128));
    }
}

// One super-block of one weight row, unpacked: 4 × 64 signed values in activation order, the
// 16-bit scale of each value pair, and the sum that cancels the activations' +128.
struct unpacked {
  __m512i q[4];
  __m512i sc[4];
  __m512i start;  // -128 · Σ scale · w, per lane
  __m256i mins;   // Q4_K/Q5_K: the min of each 16 values (pairs with Q8_K's bsums)
  float d;
  float dmin;
};

// Lane k of vpermw's index picks scale idx[k]: value pair k of 64 values (lanes 0-15 the first
// 32 values, 16-31 the next 32) in sub-blocks of 32 (Q4_K/Q5_K: chunk c uses scales 2c, 2c + 1).
HEARTH_AVX512 inline __m512i pair_index_32(int c) {
  return _mm512_inserti64x4(_mm512_set1_epi16(short(2 * c)), _mm256_set1_epi16(short(2 * c + 1)),
                            1);
}

// Q6_K: sub-blocks of 16, so 64 values use scales 4q .. 4q + 3, eight lanes each.
HEARTH_AVX512 inline __m512i pair_index_16(int q) {
  const __m128i a = _mm_set1_epi16(short(4 * q)), b = _mm_set1_epi16(short(4 * q + 1));
  const __m128i c = _mm_set1_epi16(short(4 * q + 2)), d = _mm_set1_epi16(short(4 * q + 3));
  const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
  const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(c), d, 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

HEARTH_AVX512 inline void finish_start(unpacked& u) {
  const __m512i k128 = _mm512_set1_epi8(char(0x80));
  __m512i s = _mm512_setzero_si512();
  for (int q = 0; q < 4; ++q)
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(k128, u.q[q]), u.sc[q]);
  u.start = _mm512_sub_epi32(_mm512_setzero_si512(), s);
}

template <typename Block>
HEARTH_AVX512 inline void unpack_q45_k(const Block& blk, unpacked& u) {
  constexpr bool k_fifth_bit = std::is_same_v<Block, block_q5_k>;
  uint8_t sm[16];
  k_scales_mins(blk.scales, sm);
  u.d = _cvtsh_ss(blk.d);
  u.dmin = _cvtsh_ss(blk.dmin);
  const __m512i sc8 = _mm512_castsi128_si512(
      _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm))));
  const __m128i m8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8));
  u.mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m512i hb = _mm512_setzero_si512();
  if constexpr (k_fifth_bit)
    hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)));
  for (int c = 0; c < 4; ++c) {
    const __m256i nib = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
    __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(nib, low4)),
                                   _mm256_and_si256(_mm256_srli_epi16(nib, 4), low4), 1);
    if constexpr (k_fifth_bit) {
      // Bit 2c of qh[l] for the first 32 values, bit 2c + 1 for the next 32.
      const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(short(2 * c)),
                                               _mm256_set1_epi16(short(2 * c + 1)), 1);
      const __m512i bit = _mm512_and_si512(_mm512_srlv_epi16(hb, shift), _mm512_set1_epi8(1));
      q = _mm512_or_si512(q, _mm512_slli_epi16(bit, 4));
    }
    u.q[c] = q;
    u.sc[c] = _mm512_permutexvar_epi16(pair_index_32(c), sc8);
  }
  finish_start(u);
}

// Q6_K (layout at block_q6_k): half h of 128 values gives two registers, groups (0, 1) and
// (2, 3): low 4 bits from ql (low nibbles, then high), top 2 bits from qh at bit 2g.
HEARTH_AVX512 inline void unpack_q6_k(const block_q6_k& blk, unpacked& u) {
  u.d = _cvtsh_ss(blk.d);
  u.dmin = 0;
  u.mins = _mm256_setzero_si256();
  const __m512i sc16 = _mm512_castsi256_si512(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales))));
  const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
  const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  for (int h = 0; h < 2; ++h) {
    const __m512i l = _mm512_loadu_si512(blk.ql + 64 * h);
    const __m512i hb = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
    const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, low4),
                                        _mm512_and_si512(_mm512_sllv_epi16(hb, shl), top2));
    const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                        _mm512_and_si512(_mm512_srlv_epi16(hb, shr), top2));
    u.q[2 * h] = _mm512_sub_epi8(q01, _mm512_set1_epi8(32));
    u.q[2 * h + 1] = _mm512_sub_epi8(q23, _mm512_set1_epi8(32));
  }
  for (int q = 0; q < 4; ++q) u.sc[q] = _mm512_permutexvar_epi16(pair_index_16(q), sc16);
  finish_start(u);
}

template <tensor_type W>
HEARTH_AVX512 inline void unpack(const uint8_t* row, int64_t b, unpacked& u) {
  if constexpr (W == tensor_type::q4_k) {
    unpack_q45_k(reinterpret_cast<const block_q4_k*>(row)[b], u);
  } else if constexpr (W == tensor_type::q5_k) {
    unpack_q45_k(reinterpret_cast<const block_q5_k*>(row)[b], u);
  } else {
    unpack_q6_k(reinterpret_cast<const block_q6_k*>(row)[b], u);
  }
}

// The fixed-size tiles of one weight type, for tile_dispatch (engine/cpu/gemm.h).
template <tensor_type W>
struct tiles {
  template <int R, int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x,
                                int64_t x_stride, float* y, int64_t ldy) {
    constexpr bool k_mins = W != tensor_type::q6_k;
    __m512 acc[R][C];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / k_qk_k; ++b) {
      unpacked u[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) unpack<W>(w + r * w_stride, b, u[r]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) {
        const auto& xb = reinterpret_cast<const block_q8_k*>(x + c * x_stride)[b];
        __m512i xq[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) xq[q] = _mm512_loadu_si512(xb.qs + 64 * q);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __m512i s = u[r].start;
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q)
            s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(xq[q], u[r].q[q]), u[r].sc[q]);
          acc[r][c] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(u[r].d * xb.d), acc[r][c]);
          if constexpr (k_mins) {
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
            const __m256 m = _mm256_cvtepi32_ps(_mm256_madd_epi16(u[r].mins, bsums));
            acc[r][c] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(m),
                                         _mm512_set1_ps(u[r].dmin * xb.d), acc[r][c]);
          }
        }
      }
    }
    store_tile_sums<R, C>(acc, y, ldy);
  }
};

template <tensor_type W>
constexpr auto tile_any = tile_dispatch<tiles<W>, k_rows, k_cols>;

const gemm_kernel k_q4_k{k_rows, k_cols, x_row_bytes, x_from_float, tile_any<tensor_type::q4_k>};
const gemm_kernel k_q5_k{k_rows, k_cols, x_row_bytes, x_from_float, tile_any<tensor_type::q5_k>};
const gemm_kernel k_q6_k{k_rows, k_cols, x_row_bytes, x_from_float, tile_any<tensor_type::q6_k>};

}  // namespace

const gemm_kernel* gemm_kernel_k_avx512(tensor_type t) {
  return gemm_kernel_find(
      t,
      {{tensor_type::q4_k, &k_q4_k}, {tensor_type::q5_k, &k_q5_k}, {tensor_type::q6_k, &k_q6_k}});
}

}  // namespace hearth::cpu
