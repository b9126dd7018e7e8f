// Causal attention over the KV cache for a batch of tokens from any number of sequences.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/cpu/backend-cpu.h"
#include "engine/cpu/vec-dot.h"
#include "engine/io/cpu-features.h"
#if defined(__x86_64__)
#include "engine/cpu/avx2.h"
#include "engine/cpu/avx512.h"
#endif

namespace hearth::cpu {

namespace {

// One token's query heads of one KV head against the cells it sees: the math of op_attention.
struct group_args {
  const float* q = nullptr;  // [n_heads][dk]: q as the cache's type holds it, in F32
  int32_t n_heads = 0, dk = 0, dv = 0;
  const int32_t* cells = nullptr;  // visible cells, in position order
  int32_t n_vis = 0;
  const uint8_t* k_base = nullptr;  // this KV head's K in cell 0
  const uint8_t* v_base = nullptr;
  int64_t k_row_bytes = 0, v_row_bytes = 0;
  const type_kernels* kk = nullptr;
  const type_kernels* vk = nullptr;
  float scale = 1, softcap = 0;
  bool round_weights = false;  // softmax weights rounded to F16 before the V product
  // Ask for K and V rows ahead (prefetch_cells): for a token alone of its sequence in the batch
  // (decoding). A prompt's tokens read the same cells one after another, found in cache.
  bool prefetch = false;
  // Scratch: scores [n_heads][n_vis], weights in F16 (n_vis / 2 + 1 floats), one K row, one V
  // row, accumulators [n_heads][dv], a block of rows.
  float* scores = nullptr;
  float* weights16 = nullptr;
  float* krow = nullptr;
  float* vrow = nullptr;
  float* acc = nullptr;
  float* block = nullptr;  // 16 K or V rows in F32 (attend_group_avx512_f16)
  float* out = nullptr;    // [n_heads][dv]
};

constexpr int k_lanes = 16;

// Σ a[i]·b[i] in 16 independent lanes, summed pairwise at the end: the same order on every CPU.
// (Written so the compiler may use vector multiply-adds; the AVX-512 path below does not rely
// on that and has its own kernel.)
[[gnu::always_inline]] inline float dot_lanes(const float* a, const float* b, int32_t n) {
  float acc[k_lanes] = {};
  int32_t i = 0;
  for (; i + k_lanes <= n; i += k_lanes)
    for (int l = 0; l < k_lanes; ++l) acc[l] += a[i + l] * b[i + l];
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int w = k_lanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0] + tail;
}

// exp(x) for the softmax's x <= 0 (x = -inf gives 0): x = n·ln 2 + r with |r| <= ln 2 / 2 (ln 2
// in two parts, Cody and Waite), Cephes' degree-6 polynomial for e^r, and 2^n put into the
// exponent bits. Results below 2^-126 become 0, as F32 softmax weights that small vanish beside
// the largest (which is 1) anyway. The constants, for this and its 16-lane twin exp_neg16:
constexpr float k_log2e = 1.44269504088896341f;
constexpr float k_ln2_hi = 0.693359375f, k_ln2_lo = -2.12194440e-4f;
constexpr float k_exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
constexpr float k_exp_min = -87.0f;

[[gnu::always_inline]] inline float exp_neg(float x) {
  const bool tiny = x < k_exp_min;
  x = tiny ? k_exp_min : x;
  const float n = (x * k_log2e + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * k_ln2_hi;
  r = r - n * k_ln2_lo;
  float y = k_exp_poly[0];
  for (int i = 1; i < 6; ++i) y = y * r + k_exp_poly[i];
  y = y * r * r + r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return tiny ? 0.0f : y * scale;
}

// Applies the soft-cap (when > 0) to one head's scores; returns the largest.
[[gnu::always_inline]] inline float softcap_and_max(float* sc, int32_t n, float softcap) {
  if (softcap > 0)
    for (int32_t i = 0; i < n; ++i) sc[i] = softcap * std::tanh(sc[i] / softcap);
  float max = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; ++i) max = std::max(max, sc[i]);
  return max;
}

[[gnu::always_inline]] inline void attend_group(const group_args& a) {
  const int32_t nv = a.n_vis;
  // Scores: each K row converted once, against every head of the group.
  for (int32_t i = 0; i < nv; ++i) {
    a.kk->to_float(a.k_base + int64_t(a.cells[i]) * a.k_row_bytes, a.krow, a.dk);
    for (int32_t h = 0; h < a.n_heads; ++h)
      a.scores[int64_t(h) * nv + i] = dot_lanes(a.krow, a.q + int64_t(h) * a.dk, a.dk) * a.scale;
  }
  // Softmax per head; the weights rounded to the cache's type before the V product, as the
  // reference does.
  for (int32_t h = 0; h < a.n_heads; ++h) {
    float* sc = a.scores + int64_t(h) * nv;
    const float max = softcap_and_max(sc, nv, a.softcap);
    double sum[k_lanes] = {};
    int32_t i = 0;
    for (; i + k_lanes <= nv; i += k_lanes) {
      for (int l = 0; l < k_lanes; ++l) {
        sc[i + l] = exp_neg(sc[i + l] - max);
        sum[l] += sc[i + l];
      }
    }
    for (; i < nv; ++i) {
      sc[i] = exp_neg(sc[i] - max);
      sum[0] += sc[i];
    }
    for (int w = k_lanes / 2; w >= 1; w /= 2)
      for (int l = 0; l < w; ++l) sum[l] += sum[l + w];
    const float inv = float(1.0 / sum[0]);
    for (int32_t j = 0; j < nv; ++j) sc[j] *= inv;
    if (a.round_weights) {
      a.vk->from_float(sc, a.weights16, nv);
      a.vk->to_float(a.weights16, sc, nv);
    }
  }
  // Σ weight · V: each V row converted once, added into every head's accumulator.
  std::fill(a.acc, a.acc + int64_t(a.n_heads) * a.dv, 0.0f);
  for (int32_t i = 0; i < nv; ++i) {
    a.vk->to_float(a.v_base + int64_t(a.cells[i]) * a.v_row_bytes, a.vrow, a.dv);
    for (int32_t h = 0; h < a.n_heads; ++h) {
      const float w = a.scores[int64_t(h) * nv + i];
      if (w == 0.0f) continue;
      float* acc = a.acc + int64_t(h) * a.dv;
      for (int32_t d = 0; d < a.dv; ++d) acc[d] += w * a.vrow[d];
    }
  }
  std::copy(a.acc, a.acc + int64_t(a.n_heads) * a.dv, a.out);
}

// attend_group compiled for each CPU the backend has kernels for (the same source: only the
// vector width differs; HEARTH_CPU_PORTABLE / HEARTH_CPU_NO_AVX512 choose as for the products).
#if defined(__x86_64__)
// exp_neg on 16 lanes, the same steps and constants.
HEARTH_AVX512 inline __m512 exp_neg16(__m512 x) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(k_exp_min), _CMP_LT_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(k_exp_min));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(k_log2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k_ln2_hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k_ln2_lo), r);
  __m512 y = _mm512_set1_ps(k_exp_poly[0]);
  for (int i = 1; i < 6; ++i) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(k_exp_poly[i]));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(~tiny, y, _mm512_castsi512_ps(bits));
}

// F16 values c·16 .. c·16 + 15 of a row, as F32.
HEARTH_AVX512 inline __m512 load16(const uint8_t* p, int32_t c) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p) + c));
}

// How many cells ahead the K and V rows are asked for (prefetch_cells). A job reads its KV
// head's slice of each cache row (2 cache lines of every 8 for 64-value heads of 4 KV heads), at
// cells in any order. Decoding at depth 4,096 (TinyLlama Q4_K_M, Zen 5) spent 43% of its time in
// attention, most of it on the loads of K and V rows. With the rows asked for 32 cells ahead,
// tg64 at depth 2,048 went from 61.1 / 63.1 / 60.9 to 67.4 / 67.6 / 65.5 t/s (alternating), and
// at depth 4,096 from 45.8 to 51.5. 64 cells ahead, or a second prefetch into L2 96 or 224
// cells ahead, measured no better. Neither did reading whole rows in order (every KV head's
// scores of a block of cells by one thread, then the softmax and V per head): the pass is then
// bound inside the core (one thread spends 11.6 ms per token at depth 4,096 on 92 MB of K and V,
// 8 GB/s), by the loads and horizontal sums of scores_block and values_heads.
constexpr int32_t k_cells_ahead = 32;

// Asks for the rows (their first `bytes`) of visible cells from .. to - 1 (clamped to n_vis).
inline void prefetch_cells(const group_args& a, const uint8_t* base, int64_t row_bytes,
                           int32_t bytes, int32_t from, int32_t to) {
  if (!a.prefetch) return;
  for (int32_t j = from; j < std::min(to, a.n_vis); ++j) {
    const char* r = reinterpret_cast<const char*>(base + int64_t(a.cells[j]) * row_bytes);
    for (int32_t o = 0; o < bytes; o += 64) _mm_prefetch(r + o, _MM_HINT_T0);
  }
}

// The F16 rows (`dim` values, row_bytes apart) of cells i .. i + nb - 1 (nb <= 16) of `base` as
// F32 in a.block, row after row, once the rows k_cells_ahead further on are asked for. N16:
// dim / 16 when known at compile time, else 0.
template <int N16>
HEARTH_AVX512 inline void rows_to_block(const group_args& a, const uint8_t* base, int64_t row_bytes,
                                        int32_t dim, int32_t i, int32_t nb) {
  const int32_t n16 = N16 ? N16 : dim / 16;
  prefetch_cells(a, base, row_bytes, dim * 2, i + k_cells_ahead, i + k_cells_ahead + 16);
  for (int32_t j = 0; j < nb; ++j) {
    const uint8_t* r = base + int64_t(a.cells[i + j]) * row_bytes;
    for (int32_t c = 0; c < n16; ++c) _mm512_storeu_ps(a.block + (j * n16 + c) * 16, load16(r, c));
  }
}

// The scores of cells i .. i + nb - 1 (nb <= 16) for every head, K rows converted to F32 once for
// all heads: a head's scores are up to 16 registers of multiply-adds summed across lanes together
// (the missing cells of a last, partial block are zero and not stored). NK: the head size in
// 16-lane chunks (0: a.dk / 16, known at run time only).
template <int NK>
HEARTH_AVX512 void scores_block(const group_args& a, int32_t i, int32_t nb) {
  const int32_t nk = NK ? NK : a.dk / 16;
  rows_to_block<NK>(a, a.k_base, a.k_row_bytes, a.dk, i, nb);
  const __mmask16 cells = __mmask16((1u << nb) - 1);
  for (int32_t h = 0; h < a.n_heads; ++h) {
    const float* q = a.q + int64_t(h) * a.dk;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int32_t j = 0; j < 16; ++j) {
      acc[j] = _mm512_setzero_ps();
      if (j >= nb) continue;
      const float* k = a.block + j * nk * 16;
      acc[j] = _mm512_mul_ps(_mm512_loadu_ps(k), _mm512_loadu_ps(q));
#pragma GCC unroll 16
      for (int32_t c = 1; c < nk; ++c)
        acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * c), _mm512_loadu_ps(q + 16 * c), acc[j]);
    }
    _mm512_mask_storeu_ps(a.scores + int64_t(h) * a.n_vis + i, cells,
                          _mm512_mul_ps(hsum512_x16(acc), _mm512_set1_ps(a.scale)));
  }
}

// Σ weight · V over cells i0 .. i0 + nb - 1 (nb <= 16) into the accumulators of heads h0 ..
// h0 + H - 1, from V rows already in F32 in a.block. The sums stay in registers over the block,
// and H heads go together: one head's sum is a chain of dependent multiply-adds (NVD
// registers), too few to keep the FMA units busy alone, and H heads share each V load. Cell by
// cell, skipping zero weights, so each head's sum is the one-cell loop's bit for bit.
template <int NVD, int H>
HEARTH_AVX512 void values_heads(const group_args& a, int32_t i0, int32_t nb, int32_t h0) {
  const int32_t nvd = NVD ? NVD : a.dv / 16;
  __m512 av[H][NVD ? NVD : 16];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
    for (int32_t c = 0; c < nvd; ++c) av[h][c] = _mm512_loadu_ps(a.acc + (h0 + h) * a.dv + 16 * c);
  for (int32_t j = 0; j < nb; ++j) {
    const float* v = a.block + j * nvd * 16;
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const float w = a.scores[int64_t(h0 + h) * a.n_vis + i0 + j];
      const __mmask16 live = w != 0.0f ? __mmask16(0xffff) : __mmask16(0);
      const __m512 vw = _mm512_set1_ps(w);
#pragma GCC unroll 16
      for (int32_t c = 0; c < nvd; ++c)
        av[h][c] = _mm512_mask3_fmadd_ps(vw, _mm512_loadu_ps(v + 16 * c), av[h][c], live);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h)
#pragma GCC unroll 16
    for (int32_t c = 0; c < nvd; ++c) _mm512_storeu_ps(a.acc + (h0 + h) * a.dv + 16 * c, av[h][c]);
}

// Σ weight · V over cells i0 .. i0 + nb - 1 (nb <= 16) for every head, V rows converted to F32
// once for all heads.
template <int NVD>
HEARTH_AVX512 void values_block(const group_args& a, int32_t i0, int32_t nb) {
  rows_to_block<NVD>(a, a.v_base, a.v_row_bytes, a.dv, i0, nb);
  // Heads per pass: as many as fill 16 registers with sums.
  constexpr int H = NVD == 4 ? 4 : NVD == 8 ? 2 : 1;
  int32_t h = 0;
  for (; h + H <= a.n_heads; h += H) values_heads<NVD, H>(a, i0, nb, h);
  for (; h < a.n_heads; ++h) values_heads<NVD, 1>(a, i0, nb, h);
}

// attend_group for an F16 cache and head sizes in multiples of 16 (up to 256), in AVX-512
// registers: cells in blocks of 16, the last one partial (scores_block, values_block), the
// softmax 16 cells at a time.
// Against one cell at a time (the version before), per cell and head about half the
// instructions and a quarter of the stores, with the same results bit for bit.
template <int NK, int NVD>
HEARTH_AVX512 void attend_group_avx512_f16(const group_args& a) {
  const int32_t nv = a.n_vis;
  prefetch_cells(a, a.k_base, a.k_row_bytes, a.dk * 2, 0, k_cells_ahead);
  for (int32_t i0 = 0; i0 < nv; i0 += 16) scores_block<NK>(a, i0, std::min(16, nv - i0));
  for (int32_t h = 0; h < a.n_heads; ++h) {
    float* sc = a.scores + int64_t(h) * nv;
    // The largest score; without a soft-cap 16 lanes at a time (a maximum does not depend on
    // the order).
    float max = -std::numeric_limits<float>::infinity();
    if (a.softcap > 0) {
      max = softcap_and_max(sc, nv, a.softcap);
    } else {
      __m512 lanes = _mm512_set1_ps(max);
      int32_t m = 0;
      for (; m + 16 <= nv; m += 16) lanes = _mm512_max_ps(lanes, _mm512_loadu_ps(sc + m));
      max = _mm512_reduce_max_ps(lanes);
      for (; m < nv; ++m) max = std::max(max, sc[m]);
    }
    const __m512 vmax = _mm512_set1_ps(max);
    __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
    int32_t i = 0;
    for (; i + 16 <= nv; i += 16) {
      const __m512 e = exp_neg16(_mm512_sub_ps(_mm512_loadu_ps(sc + i), vmax));
      _mm512_storeu_ps(sc + i, e);
      sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
      sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(sum_lo, sum_hi));
    for (; i < nv; ++i) {
      sc[i] = exp_neg(sc[i] - max);
      sum += sc[i];
    }
    const __m512 inv = _mm512_set1_ps(float(1.0 / sum));
    for (i = 0; i + 16 <= nv; i += 16) {
      const __m512 w = _mm512_mul_ps(_mm512_loadu_ps(sc + i), inv);
      _mm512_storeu_ps(sc + i, _mm512_cvtph_ps(_mm512_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT)));
    }
    for (; i < nv; ++i) sc[i] = _cvtsh_ss(_cvtss_sh(sc[i] * _mm512_cvtss_f32(inv), 0));
  }
  std::fill(a.acc, a.acc + int64_t(a.n_heads) * a.dv, 0.0f);
  prefetch_cells(a, a.v_base, a.v_row_bytes, a.dv * 2, 0, k_cells_ahead);
  for (int32_t i0 = 0; i0 < nv; i0 += 16) values_block<NVD>(a, i0, std::min(16, nv - i0));
  std::copy(a.acc, a.acc + int64_t(a.n_heads) * a.dv, a.out);
}

HEARTH_AVX512 void attend_group_avx512(const group_args& a) {
  if (a.round_weights && a.kk == kernels_for(tensor_type::f16) && a.dk % 16 == 0 &&
      a.dv % 16 == 0 && a.dk <= 256 && a.dv <= 256) {
    // Common head sizes with their loops unrolled.
    if (a.dk == 64 && a.dv == 64) return attend_group_avx512_f16<4, 4>(a);
    if (a.dk == 128 && a.dv == 128) return attend_group_avx512_f16<8, 8>(a);
    if (a.dk == 256 && a.dv == 256) return attend_group_avx512_f16<16, 16>(a);
    attend_group_avx512_f16<0, 0>(a);
  } else {
    attend_group(a);
  }
}
HEARTH_AVX2 void attend_group_avx2(const group_args& a) {
  attend_group(a);
}
#endif
void attend_group_portable(const group_args& a) {
  attend_group(a);
}

using group_kernel = void (*)(const group_args&);

group_kernel group_kernel_for_cpu() {
#if defined(__x86_64__)
  if (cpu_has_avx512_vnni()) return attend_group_avx512;
  if (cpu_has_avx2()) return attend_group_avx2;
#endif
  return attend_group_portable;
}

}  // namespace

void op_attention(thread_pool& pool, scratch& s, const tensor& q, const tensor& k_cache,
                  const tensor& v_cache, const tensor& tok_seq, const tensor& tok_pos,
                  const tensor& cell_seq, const tensor& cell_pos, int32_t n_cells,
                  const attention_params& p, const tensor& out) {
  const int64_t n_tok = q.ne[1];
  const type_kernels* kk = kernels_for(k_cache.type);
  const type_kernels* vk = kernels_for(v_cache.type);
  const int32_t* tseq = static_cast<const int32_t*>(tok_seq.data);
  const int32_t* tpos = static_cast<const int32_t*>(tok_pos.data);
  const int32_t* cseq = static_cast<const int32_t*>(cell_seq.data);
  const int32_t* cpos = static_cast<const int32_t*>(cell_pos.data);
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t k_row_bytes = k_cache.row_bytes();
  const int64_t v_row_bytes = v_cache.row_bytes();
  const int64_t k_head_bytes = tensor_type_row_bytes(k_cache.type, p.head_dim_k);
  const int64_t v_head_bytes = tensor_type_row_bytes(v_cache.type, p.head_dim_v);

  // The cells each token sees, in position order. Sums then run in the same order however the
  // cache laid the cells out, so a sequence sharing a busy cache with others gets bit-for-bit
  // the results it gets alone (cells are handed out round the cache and reused as sequences
  // end, so cell order is not position order in general).
  // (Reused across calls; bound to references because the workers below must read the calling
  // thread's lists, not their own thread_local instances.)
  thread_local std::vector<int32_t> tl_visible;
  thread_local std::vector<int64_t> tl_first;
  std::vector<int32_t>& visible = tl_visible;
  std::vector<int64_t>& first = tl_first;
  visible.clear();
  first.assign(size_t(n_tok) + 1, 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    const size_t begin = visible.size();
    for (int32_t c = 0; c < n_cells; ++c) {
      if (cseq[c] == tseq[t] && cpos[c] <= tpos[t] &&
          (p.window <= 0 || tpos[t] - cpos[c] < p.window)) {
        visible.push_back(c);
      }
    }
    auto by_pos = [&](int32_t a, int32_t b) { return cpos[a] < cpos[b]; };
    if (!std::is_sorted(visible.begin() + ptrdiff_t(begin), visible.end(), by_pos)) {
      std::sort(visible.begin() + ptrdiff_t(begin), visible.end(), by_pos);
    }
    first[size_t(t) + 1] = int64_t(visible.size());
  }

  // Jobs: one token's query heads that share a KV head (GQA), so each K and V row is converted
  // once for all of them; split further when there are fewer jobs than threads (one token, few
  // KV heads: decoding).
  const int32_t splits = int32_t(std::clamp<int64_t>(
      (2 * int64_t(pool.n_threads()) + n_tok * p.n_head_kv - 1) / (n_tok * p.n_head_kv), 1, group));
  const int32_t per_job = (group + splits - 1) / splits;
  const int64_t n_jobs = n_tok * p.n_head_kv * splits;
  const group_kernel attend = group_kernel_for_cpu();
  std::atomic<int64_t> next{0};
  const int64_t work = n_tok * p.n_head * int64_t(n_cells) * (p.head_dim_k + p.head_dim_v);
  const size_t dk = size_t(p.head_dim_k), dv = size_t(p.head_dim_v), g = size_t(per_job);
  const size_t nc = size_t(n_cells);
  s.grow_thread_floats(g * nc + nc + g * dk + 2 * dk + dk + dv + g * dv + 16 * std::max(dk, dv) +
                       64);
  pool.share_sized(work, [&](int ith, int) {
    float* buf = s.per_thread[size_t(ith)].data();
    group_args a;
    a.scores = buf;
    a.weights16 = buf + g * nc;
    float* q_f32 = a.weights16 + nc / 2 + 16;
    a.q = q_f32;
    float* q_conv = q_f32 + g * dk;  // one head's q in the cache type (room for F32)
    a.krow = q_conv + 2 * dk;
    a.vrow = a.krow + dk;
    a.acc = a.vrow + dv;
    a.block = a.acc + g * dv;
    a.dk = p.head_dim_k;
    a.dv = p.head_dim_v;
    a.kk = kk;
    a.vk = vk;
    a.k_row_bytes = k_row_bytes;
    a.v_row_bytes = v_row_bytes;
    a.scale = p.scale;
    a.softcap = p.softcap;
    a.round_weights = v_cache.type == tensor_type::f16;
    for (int64_t job = next++; job < n_jobs; job = next++) {
      const int64_t t = job / (int64_t(p.n_head_kv) * splits);
      const int32_t hk = int32_t(job / splits % p.n_head_kv);
      const int32_t h0 = hk * group + int32_t(job % splits) * per_job;
      a.n_heads = std::min(per_job, hk * group + group - h0);
      if (a.n_heads <= 0) continue;
      // q rounded to the cache's type, as the reference's K·Q product does for an F16 cache.
      for (int32_t h = 0; h < a.n_heads; ++h) {
        const float* qh =
            static_cast<const float*>(q.data) + t * q.ne[0] + int64_t(h0 + h) * p.head_dim_k;
        kk->from_float(qh, q_conv, p.head_dim_k);
        kk->to_float(q_conv, q_f32 + size_t(h) * dk, p.head_dim_k);
      }
      a.cells = visible.data() + first[size_t(t)];
      a.n_vis = int32_t(first[size_t(t) + 1] - first[size_t(t)]);
      a.prefetch = (t == 0 || tseq[t - 1] != tseq[t]) && (t + 1 == n_tok || tseq[t + 1] != tseq[t]);
      a.k_base = static_cast<const uint8_t*>(k_cache.data) + hk * k_head_bytes;
      a.v_base = static_cast<const uint8_t*>(v_cache.data) + hk * v_head_bytes;
      a.out = static_cast<float*>(out.data) + t * out.ne[0] + int64_t(h0) * p.head_dim_v;
      attend(a);
    }
  });
}

}  // namespace hearth::cpu
