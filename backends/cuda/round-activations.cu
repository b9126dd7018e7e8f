// Activations rounded to the weight type's dot-product type before a matrix product
// (round-math.cuh says what and why). F16 and BF16 a thread per value; Q8_0 and Q8_K a warp per
// block of 32 or 256 values (lane j holds values j, j + 32, ...), its largest magnitude found by
// shuffles: a decoding step's few rows are a few warps' work, not a long serial loop per thread.
// Grid-stride loops, 256-thread blocks.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backends/cuda/kernels.h"
#include "backends/cuda/round-math.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_block = 256;
constexpr int64_t k_max_blocks = 1 << 16;

// F16, BF16: a thread per value.
template <activation_rounding R>
__global__ void __launch_bounds__(k_block)
    round_values_kernel(const float* __restrict__ x, int64_t n, float* __restrict__ out) {
  for (int64_t i = int64_t(blockIdx.x) * k_block + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * k_block)
    round_activation_block<R>(x + i, out + i);
}

// The Q8_K scale of a block of 256 held by a warp, each lane's 8 values v[m] at index
// i0 + Stride · m: its value of largest magnitude is the first of equals in index order, as the
// CPU scans (the largest magnitude alone is the same float whatever the order).
template <int Stride>
__device__ __forceinline__ q8_k_scale q8_k_warp_scale(const float (&v)[8], int i0) {
  float amax = 0.0f, mx = 0.0f;
  int first = i0;
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float ax = round_detail::magnitude(v[m]);
    if (ax > amax) {
      amax = ax;
      mx = v[m];
      first = i0 + Stride * m;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float a2 = __shfl_xor_sync(0xffffffffu, amax, o);
    const float m2 = __shfl_xor_sync(0xffffffffu, mx, o);
    const int f2 = __shfl_xor_sync(0xffffffffu, first, o);
    if (a2 > amax || (a2 == amax && f2 < first)) {
      amax = a2;
      mx = m2;
      first = f2;
    }
  }
  return q8_k_scale_of(mx, amax);
}

// Q8_0, Q8_K: a warp per block. The largest magnitude is the same float whatever the order it is
// found in; Q8_K's value of largest magnitude is the first of equals in index order, as the CPU
// scans.
template <activation_rounding R>
__global__ void __launch_bounds__(k_block)
    round_blocks_kernel(const float* __restrict__ x, int64_t n_blocks, float* __restrict__ out) {
  constexpr int qk = activation_rounding_block(R), per_lane = qk / 32;
  constexpr int warps = k_block / 32;
  const int lane = int(threadIdx.x % 32);
  for (int64_t b = int64_t(blockIdx.x) * warps + threadIdx.x / 32; b < n_blocks;
       b += int64_t(gridDim.x) * warps) {  // the same b for a whole warp
    const float* xb = x + b * qk;
    float* yb = out + b * qk;
    float v[per_lane];
#pragma unroll
    for (int m = 0; m < per_lane; ++m) v[m] = xb[lane + 32 * m];
    if constexpr (R == activation_rounding::q8_0) {
      float amax = round_detail::magnitude(v[0]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      const q8_0_scale s = q8_0_scale_of(amax);
      yb[lane] = q8_0_value(v[0], s);
    } else {
      const q8_k_scale s = q8_k_warp_scale<32>(v, lane);
#pragma unroll
      for (int m = 0; m < per_lane; ++m) yb[lane + 32 * m] = q8_k_value(v[m], s);
    }
  }
}

// Q8_K as integers (quantize_q8k): a warp per block of 256, lane l holding values 8l .. 8l + 7,
// so that two lanes hold a 16-value sum and a lane's 8 bytes are one store.
__global__ void __launch_bounds__(k_block)
    quantize_q8k_kernel(const float* __restrict__ x, int64_t n_blocks, q8k_rows out) {
  constexpr int warps = k_block / 32;
  const int lane = int(threadIdx.x % 32);
  for (int64_t b = int64_t(blockIdx.x) * warps + threadIdx.x / 32; b < n_blocks;
       b += int64_t(gridDim.x) * warps) {  // the same b for a whole warp
    const float4* xp = reinterpret_cast<const float4*>(x + b * 256 + 8 * lane);
    const float4 p0 = xp[0], p1 = xp[1];
    const float v[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
    const q8_k_scale s = q8_k_warp_scale<1>(v, 8 * lane);
    uint32_t word[2] = {0, 0};
    int32_t sum = 0;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int32_t q = q8_k_int(v[m], s);
      sum += q;
      word[m / 4] |= uint32_t(q & 0xff) << (8 * (m % 4));
    }
    *reinterpret_cast<uint2*>(out.qs + b * 256 + 8 * lane) = make_uint2(word[0], word[1]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (lane % 2 == 0) out.sums[b * 16 + lane / 2] = sum;
    if (lane == 0) out.d[b] = s.d;
  }
}

template <activation_rounding R>
void launch(cudaStream_t s, const float* x, int64_t n, float* out) {
  if constexpr (R == activation_rounding::f16 || R == activation_rounding::bf16) {
    const int grid = int(std::min<int64_t>((n + k_block - 1) / k_block, k_max_blocks));
    round_values_kernel<R><<<grid, k_block, 0, s>>>(x, n, out);
  } else {
    const int64_t n_blocks = n / activation_rounding_block(R), warps = k_block / 32;
    const int grid = int(std::min<int64_t>((n_blocks + warps - 1) / warps, k_max_blocks));
    round_blocks_kernel<R><<<grid, k_block, 0, s>>>(x, n_blocks, out);
  }
}

}  // namespace

namespace {

// Where q8k_rows' arrays start in their allocation, each 256-aligned, and its size: written once
// for q8k_bytes and q8k_at.
struct q8k_layout {
  size_t d, sums, bytes;
};
q8k_layout q8k_layout_of(int64_t n_in, int64_t rows) {
  const auto up = [](size_t n) { return (n + 255) / 256 * 256; };
  const size_t n = size_t(n_in) * size_t(rows);
  const size_t d = up(n), sums = d + up(n / 256 * sizeof(float));
  return {d, sums, sums + up(n / 16 * sizeof(int32_t))};
}

}  // namespace

size_t q8k_bytes(int64_t n_in, int64_t rows) {
  return q8k_layout_of(n_in, rows).bytes;
}

q8k_rows q8k_at(void* p, int64_t n_in, int64_t rows) {
  const q8k_layout l = q8k_layout_of(n_in, rows);
  auto* base = static_cast<uint8_t*>(p);
  return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + l.d),
          reinterpret_cast<int32_t*>(base + l.sums)};
}

void quantize_q8k(cudaStream_t s, const float* x, int64_t n_in, int64_t rows, const q8k_rows& out) {
  if (n_in % 256 != 0) throw std::invalid_argument("quantize_q8k: rows are not whole blocks");
  const int64_t n_blocks = n_in / 256 * rows, warps = k_block / 32;
  if (n_blocks <= 0) return;
  const int grid = int(std::min<int64_t>((n_blocks + warps - 1) / warps, k_max_blocks));
  quantize_q8k_kernel<<<grid, k_block, 0, s>>>(x, n_blocks, out);
}

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
