// kv_store: one thread per value, grid (tokens, column blocks); F16 caches get the value
// rounded to nearest even, as the CPU's fp32_to_fp16 does.
#include <cuda_fp16.h>

#include <cassert>

#include "backends/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;

// src: F32 [n_tok, cols]; cells: I32 [n_tok]; cache: T [cache cells, cols].
template <typename T>
__global__ void __launch_bounds__(k_block)
    kv_store_kernel(const float* src, int64_t cols, const int32_t* cells, T* cache) {
  const int64_t j = int64_t(blockIdx.y) * k_block + threadIdx.x;
  if (j >= cols) return;
  const float v = src[int64_t(blockIdx.x) * cols + j];
  T* row = cache + int64_t(cells[blockIdx.x]) * cols;
  if constexpr (sizeof(T) == 2) {
    row[j] = __float2half_rn(v);
  } else {
    row[j] = v;
  }
}

}  // namespace

void kv_store(cudaStream_t s, const float* src, int64_t cols, int64_t n_tok, const int32_t* cells,
              void* cache, bool cache_f16) {
  if (cols <= 0 || n_tok <= 0) return;
  assert(n_tok <= 0x7fffffff && (cols + k_block - 1) / k_block <= 65535);
  const dim3 grid(unsigned(n_tok), unsigned((cols + k_block - 1) / k_block));
  if (cache_f16) {
    kv_store_kernel<<<grid, k_block, 0, s>>>(src, cols, cells, static_cast<__half*>(cache));
  } else {
    kv_store_kernel<<<grid, k_block, 0, s>>>(src, cols, cells, static_cast<float*>(cache));
  }
}

}  // namespace hearth::cuda
