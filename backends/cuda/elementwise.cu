// Elementwise ops on F32: a grid-stride loop of one value per thread per step. The functions
// are the CPU's expressions (engine/cpu/elementwise.cpp) via attention-math.cuh; expf and tanhf
// are the accurate ones (no fast math).
#include <algorithm>
#include <cmath>

#include "backends/cuda/attention-math.cuh"
#include "backends/cuda/kernels.h"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 65536;

template <elementwise_op Op>
__device__ __forceinline__ float apply(float a, float b, float p0, float p1) {
  if constexpr (Op == elementwise_op::add) return a + b;
  if constexpr (Op == elementwise_op::swiglu) return silu_mul(a, b);
  if constexpr (Op == elementwise_op::geglu) return gelu_reference(a) * b;
  if constexpr (Op == elementwise_op::scale) return a * p0;
  if constexpr (Op == elementwise_op::softcap) return p0 * tanhf(a * p1);
}

// out may alias a or b: each element is read before it is written, by the same thread.
template <elementwise_op Op>
__global__ void __launch_bounds__(k_block)
    elementwise_kernel(const float* a, const float* b, float p0, float p1, int64_t n, float* out) {
  const int64_t stride = int64_t(gridDim.x) * k_block;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < n; i += stride) {
    out[i] = apply<Op>(a[i], b ? b[i] : 0.0f, p0, p1);
  }
}

template <elementwise_op Op>
void launch(cudaStream_t s, const float* a, const float* b, float p0, float p1, int64_t n,
            float* out) {
  const int64_t blocks = std::min<int64_t>((n + k_block - 1) / k_block, k_max_blocks);
  elementwise_kernel<Op><<<unsigned(blocks), k_block, 0, s>>>(a, b, p0, p1, n, out);
}

}  // namespace

void elementwise(cudaStream_t s, elementwise_op op, const float* a, const float* b, float p0,
                 float p1, int64_t n, float* out) {
  if (n <= 0) return;
  switch (op) {
    case elementwise_op::add:
      return launch<elementwise_op::add>(s, a, b, p0, p1, n, out);
    case elementwise_op::swiglu:
      return launch<elementwise_op::swiglu>(s, a, b, p0, p1, n, out);
    case elementwise_op::geglu:
      return launch<elementwise_op::geglu>(s, a, b, p0, p1, n, out);
    case elementwise_op::scale:
      return launch<elementwise_op::scale>(s, a, nullptr, p0, p1, n, out);
    case elementwise_op::softcap:
      return launch<elementwise_op::softcap>(s, a, nullptr, p0, p1, n, out);
  }
}

}  // namespace hearth::cuda
