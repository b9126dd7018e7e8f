// mul_mat_vec: the decoding product out[t, o] = Σ_i w[o, i] · x[t, i] for up to
// k_mmv_max_tokens tokens, bound by the bandwidth of streaming w once.
//
// Blocks of 4 warps; each warp owns k_rows consecutive output rows and all n_tok tokens. Lane l
// takes groups of 8 values l, l + 32, l + 64, ... of the rows (quant.cuh group8), so that in one
// step a warp reads 32 consecutive groups of each row: contiguous weight bytes (8 blocks of a
// 32-value type, one super-block of a K-quant, whose scales the lanes then decode once per 8
// values) and contiguous activations (two float4 loads per token, shared by the k_rows rows).
// Each step issues the loads of k_unroll groups per row before using them, to keep enough bytes
// in flight. Weights are dequantized in registers and multiplied in F32 (FMA) into
// k_rows × n_tok accumulators per lane, then reduced across the warp by shuffles.
//
// mul_mat_id (the mixture-of-experts product) runs the same warp code with a block column per
// expert: the expert's matrix is the weights, its rows (grouped by moe_group) the tokens, taken
// k_mmv_max_tokens at a time.
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backends/cuda/kernels.h"
#include "backends/cuda/quant.cuh"

namespace hearth::cuda {
namespace {

constexpr int k_warps = 4;
constexpr int k_threads = 32 * k_warps;
constexpr int k_rows = 2;  // output rows per warp: each activation load serves both

// Groups per lane loaded ahead: 4 for the quantized types (4-9 bytes a group), 2 for the 16-
// and 32-bit ones (16 or 32 bytes a group).
template <tensor_type T>
constexpr int k_unroll =
    weight_traits<T>::block_bytes * 8 / weight_traits<T>::block_elems >= 16 ? 2 : 4;

__device__ __forceinline__ float warp_sum(float v) {
  HEARTH_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[r][t] += Σ_k v[r][k] · xr[t][8i + k].
template <int NT>
__device__ __forceinline__ void accumulate(float (&acc)[k_rows][NT], const float (&v)[k_rows][8],
                                           const float* const (&xr)[NT], int64_t i) {
  HEARTH_UNROLL
  for (int t = 0; t < NT; ++t) {
    const float4* xp = reinterpret_cast<const float4*>(xr[t] + 8 * i);
    const float4 a = __ldg(xp), b = __ldg(xp + 1);
    HEARTH_UNROLL
    for (int r = 0; r < k_rows; ++r) {
      float s = acc[r][t];
      s = fmaf(v[r][0], a.x, s);
      s = fmaf(v[r][1], a.y, s);
      s = fmaf(v[r][2], a.z, s);
      s = fmaf(v[r][3], a.w, s);
      s = fmaf(v[r][4], b.x, s);
      s = fmaf(v[r][5], b.y, s);
      s = fmaf(v[r][6], b.z, s);
      s = fmaf(v[r][7], b.w, s);
      acc[r][t] = s;
    }
  }
}

// One warp's rows row0 .. row0 + k_rows - 1 of w (n_out rows of row_bytes; n_in % 8 == 0, rows
// aligned for group8) times NT activation rows xr[t] (F32, 16-aligned), written to
// out[orow[t] * n_out + row] (+ bias[row] when bias is not null).
template <tensor_type T, int NT>
__device__ __forceinline__ void mmv_warp(const uint8_t* __restrict__ w, int64_t row_bytes,
                                         int64_t n_in, int64_t n_out, int64_t row0, int lane,
                                         const float* const (&xr)[NT], const int64_t (&orow)[NT],
                                         const float* __restrict__ bias, float* __restrict__ out) {
  constexpr int U = k_unroll<T>;
  // Rows past the end (n_out odd) repeat the last row and are not written.
  const uint8_t* wr[k_rows];
  HEARTH_UNROLL
  for (int r = 0; r < k_rows; ++r)
    wr[r] = w + (row0 + r < n_out ? row0 + r : n_out - 1) * row_bytes;

  float acc[k_rows][NT];
  HEARTH_UNROLL
  for (int r = 0; r < k_rows; ++r) {
    HEARTH_UNROLL
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  }

  const int64_t groups = n_in / 8;
  int64_t i = lane;
  for (; i + 32 * (U - 1) < groups; i += 32 * U) {
    float v[U][k_rows][8];
    HEARTH_UNROLL
    for (int u = 0; u < U; ++u) {
      HEARTH_UNROLL
      for (int r = 0; r < k_rows; ++r) weight_traits<T>::group8(wr[r], i + 32 * u, v[u][r]);
    }
    HEARTH_UNROLL
    for (int u = 0; u < U; ++u) accumulate<NT>(acc, v[u], xr, i + 32 * u);
  }
  for (; i < groups; i += 32) {
    float v[k_rows][8];
    HEARTH_UNROLL
    for (int r = 0; r < k_rows; ++r) weight_traits<T>::group8(wr[r], i, v[r]);
    accumulate<NT>(acc, v, xr, i);
  }

  HEARTH_UNROLL
  for (int r = 0; r < k_rows; ++r) {
    HEARTH_UNROLL
    for (int t = 0; t < NT; ++t) {
      const float sum = warp_sum(acc[r][t]);  // every lane has it; lane r·NT + t writes
      const int64_t row = row0 + r;
      if (lane == r * NT + t && row < n_out)
        out[orow[t] * n_out + row] = bias ? sum + bias[row] : sum;
    }
  }
}

// x: F32 [NT, n_in], 16-aligned; bias: F32 [n_out] or null; out: F32 [NT, n_out].
template <tensor_type T, int NT>
__global__ void __launch_bounds__(k_threads)
    mmv_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_in, int64_t n_out,
               const float* __restrict__ x, const float* __restrict__ bias,
               float* __restrict__ out) {
  const int lane = int(threadIdx.x % 32);
  const int64_t row0 = (int64_t(blockIdx.x) * k_warps + threadIdx.x / 32) * k_rows;
  if (row0 >= n_out) return;  // whole warps only: no block-wide synchronization follows
  const float* xr[NT];
  int64_t orow[NT];
  HEARTH_UNROLL
  for (int t = 0; t < NT; ++t) {
    xr[t] = x + t * n_in;
    orow[t] = t;
  }
  mmv_warp<T, NT>(w, row_bytes, n_in, n_out, row0, lane, xr, orow, bias, out);
}

// NT (<= k_mmv_max_tokens) of an expert's grouped rows: rows[t] is the output row,
// x[rows[t] / x_div] its activations.
template <tensor_type T, int NT>
__device__ __forceinline__ void mmv_id_rows(const uint8_t* w, int64_t row_bytes, int64_t n_in,
                                            int64_t n_out, int64_t row0, int lane, const float* x,
                                            int64_t x_div, const int32_t* rows, float* out) {
  const float* xr[NT];
  int64_t orow[NT];
  HEARTH_UNROLL
  for (int t = 0; t < NT; ++t) {
    orow[t] = rows[t];
    xr[t] = x + orow[t] / x_div * n_in;
  }
  mmv_warp<T, NT>(w, row_bytes, n_in, n_out, row0, lane, xr, orow, nullptr, out);
}

// mmv_id_rows<T, nt> for a count known only on the device.
template <tensor_type T, int NT = k_mmv_max_tokens>
__device__ __forceinline__ void mmv_id_rows_n(int nt, const uint8_t* w, int64_t row_bytes,
                                              int64_t n_in, int64_t n_out, int64_t row0, int lane,
                                              const float* x, int64_t x_div, const int32_t* rows,
                                              float* out) {
  if (nt == NT) {
    mmv_id_rows<T, NT>(w, row_bytes, n_in, n_out, row0, lane, x, x_div, rows, out);
  } else if constexpr (NT > 1) {
    mmv_id_rows_n<T, NT - 1>(nt, w, row_bytes, n_in, n_out, row0, lane, x, x_div, rows, out);
  }
}

// One warp's dot product of a weight row with an F32 row, value by value: the fallback kernels'.
template <tensor_type T>
__device__ __forceinline__ float value_dot(const uint8_t* __restrict__ wr,
                                           const float* __restrict__ x, int64_t n_in, int lane) {
  float acc = 0.0f;
  for (int64_t j = lane; j < n_in; j += 32)
    acc = fmaf(weight_traits<T>::value(wr, j), __ldg(x + j), acc);
  return warp_sum(acc);
}

// The fallback for what mmv_kernel does not take (F32/F16/BF16 rows of a length not a multiple
// of 8 or at unaligned addresses, activations not 16-aligned): one warp per row, lanes over the
// values, one token after the other.
template <tensor_type T>
__global__ void __launch_bounds__(k_threads)
    mmv_value_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t n_in, int64_t n_out,
                     const float* __restrict__ x, int64_t n_tok, const float* __restrict__ bias,
                     float* __restrict__ out) {
  const int lane = int(threadIdx.x % 32);
  const int64_t row = int64_t(blockIdx.x) * k_warps + threadIdx.x / 32;
  if (row >= n_out) return;
  const uint8_t* wr = w + row * row_bytes;
  for (int64_t t = 0; t < n_tok; ++t) {
    const float sum = value_dot<T>(wr, x + t * n_in, n_in, lane);
    if (lane == 0) out[t * n_out + row] = bias ? sum + bias[row] : sum;
  }
}

// Block column blockIdx.y is expert e: its matrix at w + e * expert_bytes, its output rows
// rows[start[e] .. start[e + 1]). Values: mmv_value_kernel's way (one row per warp, value by
// value), for what mmv_warp does not take; else mmv_warp's k_rows rows per warp.
template <tensor_type T, bool Values>
__global__ void __launch_bounds__(k_threads)
    mmv_id_kernel(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t expert_bytes,
                  int64_t n_in, int64_t n_out, const float* __restrict__ x, int64_t x_div,
                  const int32_t* __restrict__ rows, const int32_t* __restrict__ start,
                  float* __restrict__ out) {
  const int32_t e = int32_t(blockIdx.y);
  const int32_t first = start[e], count = start[e + 1] - first;
  const int lane = int(threadIdx.x % 32);
  const int64_t row0 = (int64_t(blockIdx.x) * k_warps + threadIdx.x / 32) * (Values ? 1 : k_rows);
  if (count <= 0 || row0 >= n_out) return;  // an expert no row chose: its weights stay unread
  const uint8_t* we = w + e * expert_bytes;
  if constexpr (Values) {
    for (int32_t c = 0; c < count; ++c) {
      const int64_t r = rows[first + c];
      const float sum = value_dot<T>(we + row0 * row_bytes, x + r / x_div * n_in, n_in, lane);
      if (lane == 0) out[r * n_out + row0] = sum;
    }
  } else {
    for (int32_t c0 = 0; c0 < count; c0 += k_mmv_max_tokens) {
      const int nt = int(min(count - c0, int32_t(k_mmv_max_tokens)));
      mmv_id_rows_n<T>(nt, we, row_bytes, n_in, n_out, row0, lane, x, x_div, rows + first + c0,
                       out);
    }
  }
}

template <tensor_type T>
void launch_mmv(cudaStream_t s, unsigned blocks, int64_t n_tok, const uint8_t* w, int64_t row_bytes,
                int64_t n_in, int64_t n_out, const float* x, const float* bias, float* out) {
  static_assert(k_mmv_max_tokens == 8);
  switch (n_tok) {
    case 1:
      mmv_kernel<T, 1><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 2:
      mmv_kernel<T, 2><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 3:
      mmv_kernel<T, 3><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 4:
      mmv_kernel<T, 4><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 5:
      mmv_kernel<T, 5><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 6:
      mmv_kernel<T, 6><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 7:
      mmv_kernel<T, 7><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    case 8:
      mmv_kernel<T, 8><<<blocks, k_threads, 0, s>>>(w, row_bytes, n_in, n_out, x, bias, out);
      break;
    default:
      throw std::invalid_argument("mul_mat_vec: n_tok out of range");
  }
}

unsigned grid_blocks(int64_t warps) {
  const int64_t blocks = (warps + k_warps - 1) / k_warps;
  if (blocks > INT_MAX) throw std::invalid_argument("mul_mat_vec: too many rows");
  return unsigned(blocks);
}

// How mul_mat_vec and mul_mat_id read w (rows of n_in values of type T) for activations x.
struct mmv_layout {
  const uint8_t* w;
  int64_t row_bytes;
  bool grouped;  // mmv_warp takes them; else the value-by-value fallback
};

// Every row (and so every expert's matrix, a whole number of rows) starts `align`-aligned when
// the first does: block sizes are multiples of their alignment.
template <tensor_type T>
mmv_layout mmv_layout_for(const void* w, int64_t n_in, const float* x, const std::string& what) {
  using traits = weight_traits<T>;
  if (n_in < 0 || n_in % traits::block_elems != 0)
    throw std::invalid_argument(what + ": rows are not whole blocks");
  const int64_t row_bytes = n_in / traits::block_elems * traits::block_bytes;
  const auto base = reinterpret_cast<uintptr_t>(w);
  if (traits::block_elems > 1 && base % traits::align != 0)
    throw std::invalid_argument(what + ": misaligned weights");
  const bool grouped = n_in % 8 == 0 && base % traits::align == 0 &&
                       row_bytes % traits::align == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  return {static_cast<const uint8_t*>(w), row_bytes, grouped};
}

}  // namespace

void mul_mat_vec(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                 const float* x, int64_t n_tok, const float* bias, float* out) {
  if (n_out <= 0 || n_tok <= 0) return;
  if (n_tok > k_mmv_max_tokens)
    throw std::invalid_argument("mul_mat_vec: more than k_mmv_max_tokens tokens");
  dispatch_weight_type(t, "mul_mat_vec", [&](auto tag) {
    constexpr tensor_type T = decltype(tag)::value;
    const mmv_layout l = mmv_layout_for<T>(w, n_in, x, "mul_mat_vec");
    if (l.grouped) {
      const unsigned blocks = grid_blocks((n_out + k_rows - 1) / k_rows);
      launch_mmv<T>(s, blocks, n_tok, l.w, l.row_bytes, n_in, n_out, x, bias, out);
    } else {
      mmv_value_kernel<T><<<grid_blocks(n_out), k_threads, 0, s>>>(l.w, l.row_bytes, n_in, n_out, x,
                                                                   n_tok, bias, out);
    }
  });
}

void mul_mat_id(cudaStream_t s, tensor_type t, const void* w, int64_t n_in, int64_t n_out,
                int32_t n_expert, const float* x, int64_t x_div, const int32_t* rows,
                const int32_t* start, float* out) {
  if (n_out <= 0 || n_expert <= 0) return;
  if (n_expert > 65535) throw std::invalid_argument("mul_mat_id: more than 65535 experts");
  dispatch_weight_type(t, "mul_mat_id", [&](auto tag) {
    constexpr tensor_type T = decltype(tag)::value;
    const mmv_layout l = mmv_layout_for<T>(w, n_in, x, "mul_mat_id");
    const int64_t expert_bytes = l.row_bytes * n_out;
    if (l.grouped) {
      const dim3 grid(grid_blocks((n_out + k_rows - 1) / k_rows), unsigned(n_expert));
      mmv_id_kernel<T, false><<<grid, k_threads, 0, s>>>(l.w, l.row_bytes, expert_bytes, n_in,
                                                         n_out, x, x_div, rows, start, out);
    } else {
      const dim3 grid(grid_blocks(n_out), unsigned(n_expert));
      mmv_id_kernel<T, true><<<grid, k_threads, 0, s>>>(l.w, l.row_bytes, expert_bytes, n_in, n_out,
                                                        x, x_div, rows, start, out);
    }
  });
}

}  // namespace hearth::cuda
