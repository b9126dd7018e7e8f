// The prompt path's conversions around cuBLAS: quantized weight rows dequantized to F32
// (dequantize_rows), activations rounded to F16/BF16 (convert_f32), and the bias added after the
// GEMM (add_bias). Grid-stride loops over the elements (or groups of 8 of them) with 256-thread
// blocks.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backends/cuda/check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/quant.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 1 << 16;

int grid_for(int64_t work) {
  return int(std::min<int64_t>((work + k_block - 1) / k_block, k_max_blocks));
}

__device__ __forceinline__ uint32_t half_bits(float f) {
  return __half_as_ushort(__float2half_rn(f));
}

// out: [n_rows, n_in] F32, 16-aligned; n_in % 8 == 0; w at row 0 of the range.
template <tensor_type T>
__global__ void __launch_bounds__(k_block)
    dequantize_group_kernel(const uint8_t* w, int64_t row_bytes, int64_t n_in, int64_t n_rows,
                            float* out) {
  const int64_t groups = n_in / 8, total = n_rows * groups;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block) {
    const int64_t r = i / groups, g = i % groups;
    float v[8];
    weight_traits<T>::group8(w + r * row_bytes, g, v);
    float4* o = reinterpret_cast<float4*>(out + r * n_in + 8 * g);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

template <tensor_type T>
__global__ void __launch_bounds__(k_block)
    dequantize_value_kernel(const uint8_t* w, int64_t row_bytes, int64_t n_in, int64_t n_rows,
                            float* out) {
  const int64_t total = n_rows * n_in;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block) {
    const int64_t r = i / n_in, c = i % n_in;
    out[i] = weight_traits<T>::value(w + r * row_bytes, c);
  }
}

__global__ void __launch_bounds__(k_block)
    convert_f32_kernel(const float* x, int64_t n, bool bf16, uint16_t* out) {
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * k_block) {
    const float f = x[i];
    out[i] = bf16 ? float_to_bf16_bits(f) : uint16_t(half_bits(f));
  }
}

__global__ void __launch_bounds__(k_block)
    add_bias_kernel(float* out, const float* bias, int64_t n_out, int64_t n_tok) {
  const int64_t total = n_out * n_tok;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block)
    out[i] += bias[i % n_out];
}

}  // namespace

void dequantize_rows(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t row0,
                     int64_t n_rows, float* out) {
  if (t == tensor_type::f32 || t == tensor_type::f16 || t == tensor_type::bf16)
    throw std::invalid_argument(
        "dequantize_rows: F32, F16 and BF16 weights are multiplied as they are");
  if (n_rows <= 0 || n_in <= 0) return;
  dispatch_weight_type(t, "dequantize_rows", [&](auto tag) {
    constexpr tensor_type T = decltype(tag)::value;
    using traits = weight_traits<T>;
    const auto* first =
        static_cast<const uint8_t*>(w) + row0 * (n_in / traits::block_elems * traits::block_bytes);
    const auto [row_bytes, grouped] =
        weight_rows_for<T>(n_in, first, out, "dequantize_rows", "weights");
    if (grouped) {
      dequantize_group_kernel<T>
          <<<grid_for(n_rows * (n_in / 8)), k_block, 0, s>>>(first, row_bytes, n_in, n_rows, out);
    } else {
      dequantize_value_kernel<T>
          <<<grid_for(n_rows * n_in), k_block, 0, s>>>(first, row_bytes, n_in, n_rows, out);
    }
  });
}

void convert_f32(cudaStream_t s, const float* x, int64_t n, bool bf16, uint16_t* out) {
  if (n <= 0) return;
  convert_f32_kernel<<<grid_for(n), k_block, 0, s>>>(x, n, bf16, out);
}

void add_bias(cudaStream_t s, float* out, const float* bias, int64_t n_out, int64_t n_tok) {
  if (n_out <= 0 || n_tok <= 0) return;
  add_bias_kernel<<<grid_for(n_out * n_tok), k_block, 0, s>>>(out, bias, n_out, n_tok);
}

}  // namespace hearth::cuda
