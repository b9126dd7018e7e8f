// Mixture-of-experts ops but the expert product (mul-mat-vec.cu: mul_mat_id): the router
// (moe_route, one warp per token, moe-math.cuh), the grouping of the product's rows by expert
// (moe_group) and the weighted sum of the chosen experts' outputs (moe_combine). Everything stays
// on the device: the chosen ids are never read back, so a step with these ops is one CUDA graph.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backends/cuda/kernels.h"
#include "backends/cuda/moe-math.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_route_warps = 4;
constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 1 << 16;
constexpr int k_group_chunk = 2048;  // ids staged in shared memory per pass of moe_group

__device__ __forceinline__ moe_route_pick warp_first(moe_route_pick v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    moe_route_pick other;
    other.p = __shfl_xor_sync(0xffffffffu, v.p, o);
    other.e = __shfl_xor_sync(0xffffffffu, v.e, o);
    if (moe_route_before(other, v)) v = other;
  }
  return v;
}

// logits: F32 [n_tok, n_expert]; ids: I32 [n_tok, k]; weights: F32 [n_tok, k].
__global__ void __launch_bounds__(32 * k_route_warps)
    moe_route_kernel(const float* __restrict__ logits, int32_t n_expert, int64_t n_tok, int32_t k,
                     bool normalize, int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int lane = int(threadIdx.x % 32);
  const int64_t t = int64_t(blockIdx.x) * k_route_warps + threadIdx.x / 32;
  if (t >= n_tok) return;  // whole warps only
  const float* l = logits + t * n_expert;
  float mx = moe_route_lane_max(l, n_expert, lane, 32);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = moe_route_lane_sum(l, n_expert, lane, 32, mx);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = float(1.0 / sum);

  moe_route_pick prev;
  float chosen = 0;
  for (int32_t j = 0; j < k; ++j) {
    prev = warp_first(moe_route_lane_next(l, n_expert, lane, 32, mx, inv, prev));
    chosen += prev.p;  // every lane has the pick: the sum in order j = 0 .. k-1, as the CPU's
    if (lane == 0) {
      ids[t * k + j] = prev.e;
      weights[t * k + j] = prev.p;
    }
  }
  if (!normalize) return;
  __syncwarp();  // lane 0's writes, visible to the lanes that divide them
  chosen = fmaxf(chosen, k_moe_route_min_sum);
  for (int32_t j = lane; j < k; j += 32) weights[t * k + j] /= chosen;
}

// One block. start[e] .. start[e + 1] (start: n_expert + 1 values) index the rows of ids (I32,
// n_rows) that chose expert e, listed in increasing order in rows[]. Each thread counts, then
// lists, the rows of its experts, reading the ids from shared memory a chunk at a time: a
// counting sort that keeps rows in order, so the products run in the same order every time.
// An id outside [0, n_expert) is in no expert's list (its product row is left unwritten).
__global__ void __launch_bounds__(k_block)
    moe_group_kernel(const int32_t* __restrict__ ids, int64_t n_rows, int32_t n_expert,
                     int32_t* __restrict__ rows, int32_t* __restrict__ start) {
  __shared__ int32_t chunk[k_group_chunk];
  for (int pass = 0; pass < 2; ++pass) {
    // Pass 0 counts into start[e + 1]; pass 1 lists from start[e] (the prefix sums).
    for (int32_t e0 = 0; e0 < n_expert; e0 += k_block) {
      const int32_t e = e0 + int32_t(threadIdx.x);
      int32_t at = pass == 0 || e >= n_expert ? 0 : start[e];
      for (int64_t c0 = 0; c0 < n_rows; c0 += k_group_chunk) {
        const int n = int(min(int64_t(k_group_chunk), n_rows - c0));
        __syncthreads();  // the chunk before is read by every thread
        for (int i = int(threadIdx.x); i < n; i += k_block) chunk[i] = ids[c0 + i];
        __syncthreads();
        if (e >= n_expert) continue;
        for (int i = 0; i < n; ++i) {
          if (chunk[i] != e) continue;
          if (pass == 1) rows[at] = int32_t(c0 + i);
          ++at;
        }
      }
      if (pass == 0 && e < n_expert) start[e + 1] = at;
    }
    __syncthreads();  // the counts (global memory) visible to thread 0
    if (pass == 0 && threadIdx.x == 0) {
      start[0] = 0;
      for (int32_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
    }
    __syncthreads();
  }
}

// out[t, c] = Σ_j weights[t, j] * x[t*k + j, c], in order j = 0 .. k-1.
__global__ void __launch_bounds__(k_block)
    moe_combine_kernel(const float* __restrict__ x, const float* __restrict__ weights, int64_t cols,
                       int64_t n_tok, int32_t k, float* __restrict__ out) {
  const int64_t total = n_tok * cols;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block) {
    const int64_t t = i / cols, c = i % cols;
    const float* xt = x + t * k * cols + c;
    const float* wt = weights + t * k;
    // No FMA: the product rounded, then the sum, as the CPU's loop computes each.
    float o = __fmul_rn(xt[0], wt[0]);
    for (int32_t j = 1; j < k; ++j) o = __fadd_rn(o, __fmul_rn(xt[j * cols], wt[j]));
    out[i] = o;
  }
}

int grid_for(int64_t work) {
  return int(std::min<int64_t>((work + k_block - 1) / k_block, k_max_blocks));
}

}  // namespace

void moe_route(cudaStream_t s, const float* logits, int32_t n_expert, int64_t n_tok, int32_t k,
               bool normalize, int32_t* ids, float* weights) {
  if (n_tok <= 0 || k <= 0) return;
  if (k > n_expert) throw std::invalid_argument("moe_route: more experts chosen than there are");
  const int64_t blocks = (n_tok + k_route_warps - 1) / k_route_warps;
  moe_route_kernel<<<unsigned(blocks), 32 * k_route_warps, 0, s>>>(logits, n_expert, n_tok, k,
                                                                   normalize, ids, weights);
}

void moe_group(cudaStream_t s, const int32_t* ids, int64_t n_rows, int32_t n_expert, int32_t* rows,
               int32_t* start) {
  if (n_expert <= 0) return;
  moe_group_kernel<<<1, k_block, 0, s>>>(ids, n_rows, n_expert, rows, start);
}

void moe_combine(cudaStream_t s, const float* x, const float* weights, int64_t cols, int64_t n_tok,
                 int32_t k, float* out) {
  if (n_tok <= 0 || cols <= 0 || k <= 0) return;
  moe_combine_kernel<<<grid_for(n_tok * cols), k_block, 0, s>>>(x, weights, cols, n_tok, k, out);
}

}  // namespace hearth::cuda
