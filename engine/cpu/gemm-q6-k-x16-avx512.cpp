// Q6_K weights repacked 16 rows at a time for AVX-512 VNNI (a packed_format, engine/cpu/gemm.h),
// as gemm-q45-k-x16-avx512.cpp does for Q4_K: one 32-bit lane is one row, and vpdpbusd multiplies
// 4 values of each of 16 rows by 4 activation bytes broadcast to every lane.
//
// Q6_K has 16 sub-blocks of 16 values with signed 8-bit scales, and values q in [0, 63] stored as
// 4 low bits (ql) and 2 high bits (qh) in an order made for the reference's 32-byte registers.
// Packing reorders both so that the kernel's unpacking is a few masks and shifts per 64 bytes:
// sub-blocks go in pairs (A, B); a 64-byte ql load holds 4 values of A in the low nibbles and 4 of
// B in the high nibbles for each row, and one 64-byte qh load holds the high bits of two such
// loads. The stored q goes to vpdpbusd unsigned; the -32 of q - 32 is taken off as
// 32 · Σ scale · (Σ activations of the sub-block) with Q8_K's 16-value sums, two sub-blocks per
// vpdpwssd. Integer sums are exact; the float step (d · dx per super-block) is the reference's.
// The packed rows are 210 bytes per super-block, as stored.
#include <cstring>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/vec-dot-kernels.h"

namespace hearth::cpu {
namespace {

constexpr int k_group = 16;
constexpr int k_cols = 4;

// One super-block (256 values) of 16 rows. Sub-block pair u is sub-blocks A = 2u and B = 2u + 1
// (values 32u .. 32u + 15 and 32u + 16 .. 32u + 31). Each pair's bytes are contiguous, in the
// order the kernel reads them, so decoding reads one sequential stream (with the pair's ql and qh
// in separate arrays, two streams 1.7 KB apart, one thread read 10 GB/s instead of 25).
struct q6_k_x16 {
  uint16_t d[k_group];  // F16 per row
  struct pair {
    // [step j][row][k]: low 4 bits of A's value 4j + k (low nibble) and B's (high nibble).
    uint8_t ql[4][k_group][4];
    // [h][row][k]: the high 2 bits of the values of steps 2h and 2h + 1, byte k of each:
    // bits 0-1 A (step 2h), 2-3 B (step 2h), 4-5 A (step 2h + 1), 6-7 B (step 2h + 1).
    uint8_t qh[2][k_group][4];
    int8_t scales[k_group][2];  // [row]: the scales of A and B
  } u[8];
};
static_assert(sizeof(q6_k_x16) == k_group * sizeof(block_q6_k));

int64_t group_bytes(int64_t n) {
  return n / k_qk_k * int64_t(sizeof(q6_k_x16));
}

// The 256 values of a stored block, q in [0, 63], in order (dequantize_row_q6_K's layout).
void q6_k_values(const block_q6_k& blk, uint8_t q[k_qk_k]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk.ql + 64 * h;
    const uint8_t* qh = blk.qh + 32 * h;
    for (int g = 0; g < 4; ++g) {
      const uint8_t* low = ql + 32 * (g & 1);
      const int shift = 4 * (g >> 1);
      for (int l = 0; l < 32; ++l)
        q[128 * h + 32 * g + l] =
            uint8_t(((low[l] >> shift) & 0xF) | (((qh[l] >> (2 * g)) & 3) << 4));
    }
  }
}

void pack(const uint8_t* w, int64_t w_stride, int64_t n, int nr, uint8_t* group) {
  auto* dst = reinterpret_cast<q6_k_x16*>(group);
  std::memset(group, 0, size_t(group_bytes(n)));
  for (int r = 0; r < nr; ++r) {
    const auto* src = reinterpret_cast<const block_q6_k*>(w + r * w_stride);
    for (int64_t b = 0; b < n / k_qk_k; ++b) {
      q6_k_x16& g = dst[b];
      g.d[r] = src[b].d;
      uint8_t q[k_qk_k];
      q6_k_values(src[b], q);
      for (int u = 0; u < 8; ++u) {
        g.u[u].scales[r][0] = src[b].scales[2 * u];
        g.u[u].scales[r][1] = src[b].scales[2 * u + 1];
        const uint8_t* a = q + 32 * u;
        const uint8_t* bq = a + 16;
        for (int j = 0; j < 4; ++j)
          for (int k = 0; k < 4; ++k)
            g.u[u].ql[j][r][k] = uint8_t((a[4 * j + k] & 0xF) | (bq[4 * j + k] & 0xF) << 4);
        for (int h = 0; h < 2; ++h)
          for (int k = 0; k < 4; ++k) {
            const int j0 = 4 * (2 * h) + k, j1 = 4 * (2 * h + 1) + k;
            g.u[u].qh[h][r][k] =
                uint8_t((a[j0] >> 4) | (bq[j0] >> 4) << 2 | (a[j1] >> 4) << 4 | (bq[j1] >> 4) << 6);
          }
      }
    }
  }
}

int64_t x_row_bytes(int64_t n) {
  return n / k_qk_k * int64_t(sizeof(block_q8_k));
}

HEARTH_AVX512 void x_from_float(const float* x, void* y, int64_t n) {
  quantize_q8_k_avx512(x, static_cast<block_q8_k*>(y), n);
}

// (low & 0x0F) | (high_bits & 0x30): a 6-bit value from its nibble and its shifted top bits.
HEARTH_AVX512 inline __m512i six_bits(__m512i low, __m512i high_bits) {
  const __m512i top2 = _mm512_and_si512(high_bits, _mm512_set1_epi8(0x30));
  // ternary logic 0xEA: (a & b) | c, with a = low, b = 0x0F, c = top2.
  return _mm512_ternarylogic_epi32(low, _mm512_set1_epi8(0x0F), top2, 0xEA);
}

// C tokens against one group: y[c * ldy + r] for r < nr.
struct tiles {
  template <int C>
  HEARTH_AVX512 static void run(int64_t n, const uint8_t* w, const uint8_t* x, int64_t x_stride,
                                float* y, int64_t ldy, int nr) {
    const auto* blk = reinterpret_cast<const q6_k_x16*>(w);
    __m512 acc[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / k_qk_k; ++b) {
      const q6_k_x16& g = blk[b];
      const block_q8_k* xb[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) xb[c] = reinterpret_cast<const block_q8_k*>(x + c * x_stride) + b;
      __m512i isum[C];
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int u = 0; u < 8; ++u) {
        __m512i a_sum[C], b_sum[C];
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) a_sum[c] = b_sum[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m512i v0 = _mm512_loadu_si512(g.u[u].ql[2 * h]);
          const __m512i v1 = _mm512_loadu_si512(g.u[u].ql[2 * h + 1]);
          const __m512i hb = _mm512_loadu_si512(g.u[u].qh[h]);
          const __m512i a0 = six_bits(v0, _mm512_slli_epi16(hb, 4));
          const __m512i b0 = six_bits(_mm512_srli_epi16(v0, 4), _mm512_slli_epi16(hb, 2));
          const __m512i a1 = six_bits(v1, hb);
          const __m512i b1 = six_bits(_mm512_srli_epi16(v1, 4), _mm512_srli_epi16(hb, 2));
          const int at = 32 * u + 8 * h;  // A's values of step 2h; B's are 16 further
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            const int8_t* q8 = xb[c]->qs + at;
            a_sum[c] = _mm512_dpbusd_epi32(a_sum[c], a0, broadcast_i32(q8));
            b_sum[c] = _mm512_dpbusd_epi32(b_sum[c], b0, broadcast_i32(q8 + 16));
            a_sum[c] = _mm512_dpbusd_epi32(a_sum[c], a1, broadcast_i32(q8 + 4));
            b_sum[c] = _mm512_dpbusd_epi32(b_sum[c], b1, broadcast_i32(q8 + 20));
          }
        }
        // Lane r: the 16-bit scales of A and B; -32 times them for the activation sums.
        const __m512i sc16 = _mm512_cvtepi8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.u[u].scales)));
        const __m512i sc_a = _mm512_srai_epi32(_mm512_slli_epi32(sc16, 16), 16);
        const __m512i sc_b = _mm512_srai_epi32(sc16, 16);
        const __m512i offset = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc16, 5));
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) {
          isum[c] = _mm512_add_epi32(isum[c], _mm512_add_epi32(_mm512_mullo_epi32(a_sum[c], sc_a),
                                                               _mm512_mullo_epi32(b_sum[c], sc_b)));
          isum[c] = _mm512_dpwssd_epi32(isum[c], offset, broadcast_i32(xb[c]->bsums + 2 * u));
        }
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.d)));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c)
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]),
                                 _mm512_mul_ps(d, _mm512_set1_ps(xb[c]->d)), acc[c]);
    }
    const __mmask16 rows = __mmask16((1u << nr) - 1);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_mask_storeu_ps(y + c * ldy, rows, acc[c]);
  }
};

const packed_format k_q6_k_x16{
    k_group, group_bytes, pack,
    gemm_kernel{k_group, k_cols, x_row_bytes, x_from_float, packed_tile_dispatch<tiles, k_cols>}};

}  // namespace

const packed_format* packed_format_q6_k_avx512() {
  return &k_q6_k_x16;
}

}  // namespace hearth::cpu
