// rms_norm: one block per row, its values kept in registers. Sum of squares in double per thread
// (as the CPU and the reference sum them), reduced across the warp by shuffles and across warps
// through shared memory; then each thread scales the elements it read. With a float sum 32 and 33
// of 35 rows of layer 0's attn_norm were bit-equal to the CPU's (two synthetic test files on an
// H200); in double, 51 of 51 (a third file). The next product's rounding of its activations (F16,
// Q8) makes such a last-bit difference large wherever a value sits on a rounding boundary. Double
// arithmetic is slow on consumer GPUs, but this is one multiply-add per element.
#include <cassert>

#include "backends/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The values a thread keeps in registers between the sum and the scaling: rows of up to
// k_cached * k_block = 4096 values are read once, their weights loaded before the sum is reduced
// rather than after it (one memory latency less on the single block a decoding step launches).
constexpr int k_cached = 16;

// x, out: F32 [rows, cols] (may alias: each thread writes only the elements it read itself);
// weight: F32 [cols] or null.
__global__ void __launch_bounds__(k_block)
    rms_norm_kernel(const float* x, const float* weight, int64_t cols, float eps, float* out) {
  __shared__ double warp_sums[k_block / 32];
  const float* xr = x + int64_t(blockIdx.x) * cols;
  float* yr = out + int64_t(blockIdx.x) * cols;

  // Thread t sums values t, t + k_block, ... in that order, cached or not.
  float xv[k_cached], wv[k_cached];
  double sum = 0.0;
#pragma unroll
  for (int m = 0; m < k_cached; ++m) {
    const int64_t i = threadIdx.x + int64_t(m) * k_block;
    xv[m] = i < cols ? xr[i] : 0.0f;
    wv[m] = weight && i < cols ? weight[i] : 1.0f;
    sum += double(xv[m]) * double(xv[m]);
  }
  for (int64_t i = threadIdx.x + int64_t(k_cached) * k_block; i < cols; i += k_block)
    sum += double(xr[i]) * double(xr[i]);
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = threadIdx.x < k_block / 32 ? warp_sums[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) sum = warp_sum(sum);
  if (threadIdx.x == 0) warp_sums[0] = sum;
  __syncthreads();

  // As the CPU: the mean in double rounded to float, + eps, 1 / sqrt (IEEE division and square
  // root); then x * scale * weight, in that order.
  const float scale = 1.0f / sqrtf(float(warp_sums[0] / double(cols)) + eps);
#pragma unroll
  for (int m = 0; m < k_cached; ++m) {
    const int64_t i = threadIdx.x + int64_t(m) * k_block;
    if (i < cols) yr[i] = weight ? xv[m] * scale * wv[m] : xv[m] * scale;
  }
  for (int64_t i = threadIdx.x + int64_t(k_cached) * k_block; i < cols; i += k_block)
    yr[i] = weight ? xr[i] * scale * weight[i] : xr[i] * scale;
}

}  // namespace

void rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t cols, int64_t rows,
              float eps, float* out) {
  if (rows <= 0 || cols <= 0) return;
  assert(rows <= 0x7fffffff);
  rms_norm_kernel<<<unsigned(rows), k_block, 0, s>>>(x, weight, cols, eps, out);
}

}  // namespace hearth::cuda
