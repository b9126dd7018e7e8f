// mul_mat_vec_q8k: the decoding product in integers, for Q4_K and Q6_K weights against activations
// quantize_q8k rounded to Q8_K's 8-bit values (what the CPU and the reference dot them with).
//
// Blocks of 4 warps; each warp owns k_rows consecutive output rows and all n_tok tokens, as
// mul-mat-vec.cu's float kernel. A warp step takes 4 blocks of 256 values of each row, 8 lanes a
// block and lane j the block's sub-block j of 32 values (mmvq-math.cuh): its 32 weights as bytes
// and scales, loaded once per row; 32 activation bytes and two 16-value sums per token; 8 dp4a
// per row and token.
// The 8 lanes of a block sum their integers by shuffles, then one of them adds the block's term,
// the CPU's float expression; the warp's terms are summed by shuffles at the end.
#include <array>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include "backends/cuda/kernels.h"
#include "backends/cuda/mmvq-math.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int k_rows = 2;  // output rows per warp: each activation load serves both

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum over the 8 lanes of one block (lanes 8k .. 8k + 7).
__device__ __forceinline__ int32_t block_sum(int32_t v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  return v;
}

__device__ __forceinline__ void load32(const void* p, uint32_t (&v)[8]) {
  const uint4 a = __ldg(static_cast<const uint4*>(p)), b = __ldg(static_cast<const uint4*>(p) + 1);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// w: n_out rows of n_in / 256 blocks of type T (16-aligned rows); x: NT rows of quantize_q8k's
// output; bias: F32 [n_out] or null; out: F32 [NT, n_out].
template <tensor_type T, int NT>
__global__ void __launch_bounds__(k_threads)
    mmvq_kernel(const uint8_t* __restrict__ w, int64_t n_in, int64_t n_out, q8k_rows x,
                const float* __restrict__ bias, float* __restrict__ out) {
  using lane_t = q8k_lane<T>;
  const int lane = int(threadIdx.x % 32);
  const int64_t row0 = (int64_t(blockIdx.x) * k_warps + threadIdx.x / 32) * k_rows;
  if (row0 >= n_out) return;  // whole warps only: no block-wide synchronization follows
  const int j = lane & 7;     // the sub-block this lane takes of its block
  const int64_t nb = n_in / 256, row_bytes = nb * lane_t::block_bytes;
  // Rows past the end (n_out odd) repeat the last row and are not written.
  const uint8_t* wr[k_rows];
#pragma unroll
  for (int r = 0; r < k_rows; ++r)
    wr[r] = w + (row0 + r < n_out ? row0 + r : n_out - 1) * row_bytes;

  float acc[k_rows][NT];
#pragma unroll
  for (int r = 0; r < k_rows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  for (int64_t b0 = 0; b0 < nb; b0 += 4) {
    // Lanes past the last block read the last one and add nothing, but take part in the
    // shuffles.
    const int64_t want = b0 + lane / 8;
    const bool live = want < nb;
    const int64_t b = live ? want : nb - 1;
    lane_t l[k_rows];
#pragma unroll
    for (int r = 0; r < k_rows; ++r) l[r] = lane_t::load(wr[r] + b * lane_t::block_bytes, j);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      uint32_t a[8];
      load32(x.qs + t * n_in + b * 256 + 32 * j, a);
      const int2 s16 = __ldg(reinterpret_cast<const int2*>(x.sums + t * (n_in / 16) + b * 16) + j);
      const float xd = __ldg(x.d + t * nb + b);
#pragma unroll
      for (int r = 0; r < k_rows; ++r) {
        const k_lane_sums s = l[r].sums(a, s16.x, s16.y);
        const int32_t sumi = block_sum(s.sumi), summ = lane_t::has_mins ? block_sum(s.summ) : 0;
        if (live && j == 0) acc[r][t] += lane_t::term(xd, l[r].dbits, sumi, summ);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < k_rows; ++r) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float sum = warp_sum(acc[r][t]);  // every lane has it; lane r·NT + t writes
      const int64_t row = row0 + r;
      if (lane == r * NT + t && row < n_out) out[t * n_out + row] = bias ? sum + bias[row] : sum;
    }
  }
}

// The kernel for each token count 1 .. k_mmv_max_tokens, by index count - 1.
template <tensor_type T, int... I>
constexpr auto kernels(std::integer_sequence<int, I...>) {
  return std::array{&mmvq_kernel<T, I + 1>...};
}
template <tensor_type T>
constexpr auto k_kernels = kernels<T>(std::make_integer_sequence<int, k_mmv_max_tokens>());

}  // namespace

bool has_q8k_kernel(tensor_type t) {
  return t == tensor_type::q4_k || t == tensor_type::q6_k;
}

void mul_mat_vec_q8k(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                     const q8k_rows& x, int64_t n_tok, const float* bias, float* out) {
  if (n_out <= 0 || n_tok <= 0) return;
  if (!has_q8k_kernel(t)) throw std::invalid_argument("mul_mat_vec_q8k: not a Q4_K/Q6_K weight");
  if (n_in <= 0 || n_in % 256 != 0)
    throw std::invalid_argument("mul_mat_vec_q8k: rows are not whole blocks");
  // Q4_K rows are 16-aligned (144-byte blocks); Q6_K's 210-byte blocks need 2 (funnel loads).
  if (reinterpret_cast<uintptr_t>(w) % (t == tensor_type::q4_k ? 16 : 2) != 0)
    throw std::invalid_argument("mul_mat_vec_q8k: misaligned weights");
  const int64_t blocks = ((n_out + k_rows - 1) / k_rows + k_warps - 1) / k_warps;
  if (blocks > INT_MAX) throw std::invalid_argument("mul_mat_vec_q8k: too many rows");
  if (n_tok > k_mmv_max_tokens)
    throw std::invalid_argument("mul_mat_vec_q8k: more than k_mmv_max_tokens tokens");
  const auto* wb = static_cast<const uint8_t*>(w);
  const size_t k = size_t(n_tok - 1);
  if (t == tensor_type::q4_k) {
    k_kernels<tensor_type::q4_k>[k]<<<unsigned(blocks), k_threads, 0, s>>>(wb, n_in, n_out, x, bias,
                                                                           out);
  } else {
    k_kernels<tensor_type::q6_k>[k]<<<unsigned(blocks), k_threads, 0, s>>>(wb, n_in, n_out, x, bias,
                                                                           out);
  }
}

}  // namespace hearth::cuda
