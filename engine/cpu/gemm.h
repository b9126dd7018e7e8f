// Tile kernels of the CPU matrix product: one call computes a small block of outputs, `nr`
// weight rows × `nc` activation rows, loading each weight value once for all `nc` tokens and
// each activation value once for all `nr` rows. Decoding calls them with nc = 1 (several rows
// in flight keep memory busy); prompts with full tiles (register-blocked, compute-bound).
//
// Activations are first converted, once per product, to the kernel's own row format (F32
// rounded as the reference engine rounds them, or 8-bit blocks stored unsigned); the integer
// kernels take x + 128 as the unsigned operand of VNNI's u8 × s8 dot product and subtract
// 128 · Σw, which depends on the weights alone and so is computed once per tile row. (Packed
// layouts, below, can make the weights the unsigned operand once, at packing, instead.)
// Types and CPUs without a tile kernel use vec_dot (engine/cpu/vec-dot.h) per output.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "engine/io/tensor-type.h"

namespace hearth::cpu {

struct gemm_kernel {
  int max_rows;  // nr <= max_rows
  int max_cols;  // nc <= max_cols
  // Bytes of one activation row of n values in this kernel's format.
  int64_t (*x_row_bytes)(int64_t n);
  // F32 -> the kernel's activation format (rounded as the reference engine rounds activations
  // for this weight type).
  void (*x_from_float)(const float* x, void* y, int64_t n);
  // y[c * ldy + r] = w_r · x_c for r < nr, c < nc; w_r at w + r * w_stride, x_c at
  // x + c * x_stride, rows of n values.
  void (*tile)(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x, int64_t x_stride,
               float* y, int64_t ldy, int nr, int nc);
};

// A weight layout of the kernel's own, built once from the stored rows (engine/cpu/
// packed-weights.h): rows in groups of `group_rows`, interleaved so that one vector instruction
// takes a few values from every row of a group, with the scales pre-expanded. Its kernel's tile
// takes w at the start of a group and computes all of it (nr says how many rows are written),
// for decoding (nc = 1) as well as prompts.
struct packed_format {
  int group_rows;
  // Bytes of one group of rows of n values.
  int64_t (*group_bytes)(int64_t n);
  // Packs nr <= group_rows stored rows (at w + r * w_stride) into one group; rows past nr are
  // zero and compute to zero.
  void (*pack)(const uint8_t* w, int64_t w_stride, int64_t n, int nr, uint8_t* group);
  gemm_kernel kernel;  // max_rows == group_rows; w_stride unused
};

// The packed layout for weights of type t on this CPU, or nullptr (HEARTH_CPU_PORTABLE=1 and
// HEARTH_CPU_NO_AVX512=1 turn it off with the kernels it needs; HEARTH_CPU_NO_PACK=1 alone).
const packed_format* packed_format_for(tensor_type t);
// The layouts, gathered by packed_format_for; x86 with AVX-512 VNNI only.
const packed_format* packed_format_q4_k_avx512();
const packed_format* packed_format_q5_k_avx512();
const packed_format* packed_format_q6_k_avx512();
const packed_format* packed_format_q8_avx512(tensor_type t);     // Q8_0, Q4_0; nullptr otherwise
const packed_format* packed_format_float_avx512(tensor_type t);  // F16, BF16; nullptr otherwise

// The tile kernel for weights of type t on this CPU, or nullptr (then vec_dot is used).
// HEARTH_CPU_PORTABLE=1 turns them off, as it does the AVX2 paths.
const gemm_kernel* gemm_kernel_for(tensor_type t);

// The kernel serving t among a family's (type, kernel) pairs, or nullptr.
inline const gemm_kernel* gemm_kernel_find(
    tensor_type t, std::initializer_list<std::pair<tensor_type, const gemm_kernel*>> kernels) {
  for (const auto& [type, kernel] : kernels) {
    if (type == t) return kernel;
  }
  return nullptr;
}

// Per-family tables (nullptr when the family has no kernel for t), gathered by gemm_kernel_for;
// x86 only.
const gemm_kernel* gemm_kernel_float_avx512(tensor_type t);
const gemm_kernel* gemm_kernel_q8_avx512(tensor_type t);
const gemm_kernel* gemm_kernel_k_avx512(tensor_type t);

}  // namespace hearth::cpu

namespace hearth::cpu {

// A tile kernel compiled for one fixed size R × C (register-blocked loops fully unrolled).
using fixed_tile_fn = void (*)(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x,
                               int64_t x_stride, float* y, int64_t ldy);

// gemm_kernel::tile for a family of fixed-size kernels: T::template run<R, C> for every R in
// 1..Rows and C in 1..Cols, picked at run time for the tile at hand (the edges of a product).
template <typename T, int Rows, int Cols>
void tile_dispatch(int64_t n, const uint8_t* w, int64_t w_stride, const uint8_t* x,
                   int64_t x_stride, float* y, int64_t ldy, int nr, int nc) {
  static constexpr auto table = []<int... Rs>(std::integer_sequence<int, Rs...>) {
    auto row = []<int R, int... Cs>(std::integer_sequence<int, Cs...>) {
      return std::array<fixed_tile_fn, Cols>{&T::template run<R, Cs + 1>...};
    };
    return std::array<std::array<fixed_tile_fn, Cols>, Rows>{
        row.template operator()<Rs + 1>(std::make_integer_sequence<int, Cols>())...};
  }
  (std::make_integer_sequence<int, Rows>());
  table[size_t(nr - 1)][size_t(nc - 1)](n, w, w_stride, x, x_stride, y, ldy);
}

// gemm_kernel::tile for a packed layout's kernels: T::template run<C> computes C tokens against
// every row of one group (writing nr of them), for C in 1..Cols, picked at run time.
using packed_tile_fn = void (*)(int64_t n, const uint8_t* group, const uint8_t* x, int64_t x_stride,
                                float* y, int64_t ldy, int nr);

template <typename T, int Cols>
void packed_tile_dispatch(int64_t n, const uint8_t* w, int64_t /*w_stride*/, const uint8_t* x,
                          int64_t x_stride, float* y, int64_t ldy, int nr, int nc) {
  static constexpr auto table = []<int... Cs>(std::integer_sequence<int, Cs...>) {
    return std::array<packed_tile_fn, Cols>{&T::template run<Cs + 1>...};
  }
  (std::make_integer_sequence<int, Cols>());
  table[size_t(nc - 1)](n, w, x, x_stride, y, ldy, nr);
}

}  // namespace hearth::cpu
