// Activations rounded to the weight type's dot-product type before a matrix product
// (round-math.cuh says what and why). One thread per block of values (a value for F16/BF16, 32
// for Q8_0, 256 for Q8_K), grid-stride, 256-thread blocks: the activations are a few rows per
// decoding step, so the per-thread loop over a Q8_K block costs microseconds.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "gpu/cuda/kernels.h"
#include "gpu/cuda/round-math.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 1 << 16;

template <activation_rounding R>
__global__ void __launch_bounds__(k_block)
    round_activations_kernel(const float* __restrict__ x, int64_t n_blocks,
                             float* __restrict__ out) {
  constexpr int qk = activation_rounding_block(R);
  for (int64_t b = int64_t(blockIdx.x) * k_block + threadIdx.x; b < n_blocks;
       b += int64_t(gridDim.x) * k_block)
    round_activation_block<R>(x + b * qk, out + b * qk);
}

template <activation_rounding R>
void launch(cudaStream_t s, const float* x, int64_t n, float* out) {
  const int64_t n_blocks = n / activation_rounding_block(R);
  const int grid = int(std::min<int64_t>((n_blocks + k_block - 1) / k_block, k_max_blocks));
  round_activations_kernel<R><<<grid, k_block, 0, s>>>(x, n_blocks, out);
}

}  // namespace

bool rounds_activations(tensor_type w) {
  return activation_rounding_for(w) != activation_rounding::none;
}

void round_activations(cudaStream_t s, tensor_type w, const float* x, int64_t n_in, int64_t rows,
                       float* out) {
  const activation_rounding r = activation_rounding_for(w);
  if (r == activation_rounding::none)
    throw std::invalid_argument("round_activations: this weight type takes F32 activations");
  if (n_in % activation_rounding_block(r) != 0)
    throw std::invalid_argument("round_activations: rows are not whole blocks");
  const int64_t n = n_in * rows;
  if (n <= 0) return;
  switch (r) {
    case activation_rounding::f16:
      launch<activation_rounding::f16>(s, x, n, out);
      break;
    case activation_rounding::bf16:
      launch<activation_rounding::bf16>(s, x, n, out);
      break;
    case activation_rounding::q8_0:
      launch<activation_rounding::q8_0>(s, x, n, out);
      break;
    case activation_rounding::q8_k:
      launch<activation_rounding::q8_k>(s, x, n, out);
      break;
    case activation_rounding::none:
      break;
  }
}

}  // namespace hearth::cuda
