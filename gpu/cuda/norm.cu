// rms_norm: one block per row. Sum of squares in double per thread (as the CPU and the reference
// sum them), reduced across the warp by shuffles and across warps through shared memory; then
// each thread scales the elements it read. With a float sum 32 and 33 of 35 rows of layer 0's
// attn_norm were bit-equal to the CPU's (two synthetic test files on an H200); in double, 51 of
// 51 (a third file). The next product's rounding of its activations (F16, Q8) makes such a
// last-bit difference large wherever a value sits on a rounding boundary. Double arithmetic is
// slow on consumer GPUs, but this is one multiply-add per element.
#include <cassert>

#include "gpu/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;

__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// x, out: F32 [rows, cols] (may alias: each thread writes only the elements it read itself);
// weight: F32 [cols] or null.
__global__ void __launch_bounds__(k_block)
    rms_norm_kernel(const float* x, const float* weight, int64_t cols, float eps, float* out) {
  __shared__ double warp_sums[k_block / 32];
  const float* xr = x + int64_t(blockIdx.x) * cols;
  float* yr = out + int64_t(blockIdx.x) * cols;

  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < cols; i += k_block) sum += double(xr[i]) * double(xr[i]);
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = threadIdx.x < k_block / 32 ? warp_sums[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) sum = warp_sum(sum);
  if (threadIdx.x == 0) warp_sums[0] = sum;
  __syncthreads();

  // As the CPU: the mean in double rounded to float, + eps, 1 / sqrt (IEEE division and square
  // root).
  const float scale = 1.0f / sqrtf(float(warp_sums[0] / double(cols)) + eps);
  if (weight) {
    for (int64_t i = threadIdx.x; i < cols; i += k_block) yr[i] = xr[i] * scale * weight[i];
  } else {
    for (int64_t i = threadIdx.x; i < cols; i += k_block) yr[i] = xr[i] * scale;
  }
}

}  // namespace

void rms_norm(cudaStream_t s, const float* x, const float* weight, int64_t cols, int64_t rows,
              float eps, float* out) {
  if (rows <= 0 || cols <= 0) return;
  assert(rows <= 0x7fffffff);
  rms_norm_kernel<<<unsigned(rows), k_block, 0, s>>>(x, weight, cols, eps, out);
}

}  // namespace hearth::cuda
