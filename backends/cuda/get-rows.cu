// get_rows: the embedding lookup. One thread per group of 8 values of an output row when rows
// are whole groups at aligned addresses (every quantized type), else one thread per value.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backends/cuda/kernels.h"
#include "backends/cuda/quant.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 1 << 16;  // grid-stride beyond this

int grid_for(int64_t work) {
  return int(std::min<int64_t>((work + k_block - 1) / k_block, k_max_blocks));
}

// out: F32 [n, cols]; cols % 8 == 0; table rows and out 16-aligned.
template <tensor_type T>
__global__ void __launch_bounds__(k_block)
    get_rows_group_kernel(const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* ids,
                          int64_t n, float* out) {
  const int64_t groups = cols / 8, total = n * groups;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block) {
    const int64_t r = i / groups, g = i % groups;
    float v[8];
    weight_traits<T>::group8(table + int64_t(ids[r]) * row_bytes, g, v);
    float4* o = reinterpret_cast<float4*>(out + r * cols + 8 * g);
    o[0] = make_float4(v[0], v[1], v[2], v[3]);
    o[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

template <tensor_type T>
__global__ void __launch_bounds__(k_block)
    get_rows_value_kernel(const uint8_t* table, int64_t row_bytes, int64_t cols, const int32_t* ids,
                          int64_t n, float* out) {
  const int64_t total = n * cols;
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * k_block) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = weight_traits<T>::value(table + int64_t(ids[r]) * row_bytes, c);
  }
}

}  // namespace

bool has_weight_kernels(tensor_type t) {
  switch (t) {
    case tensor_type::f32:
    case tensor_type::f16:
    case tensor_type::bf16:
    case tensor_type::q8_0:
    case tensor_type::q4_0:
    case tensor_type::q4_1:
    case tensor_type::q5_0:
    case tensor_type::q5_1:
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
      return true;
    default:
      return false;
  }
}

void get_rows(cudaStream_t s, tensor_type t, const void* table, int64_t cols, const int32_t* ids,
              int64_t n, float* out) {
  if (n <= 0 || cols <= 0) return;
  dispatch_weight_type(t, "get_rows", [&](auto tag) {
    constexpr tensor_type T = decltype(tag)::value;
    const auto [row_bytes, grouped] =
        weight_rows_for<T>(cols, table, out, "get_rows", "weight table");
    const auto* w = static_cast<const uint8_t*>(table);
    if (grouped) {
      get_rows_group_kernel<T>
          <<<grid_for(n * (cols / 8)), k_block, 0, s>>>(w, row_bytes, cols, ids, n, out);
    } else {
      get_rows_value_kernel<T>
          <<<grid_for(n * cols), k_block, 0, s>>>(w, row_bytes, cols, ids, n, out);
    }
  });
}

}  // namespace hearth::cuda
