// Matrix products on stored weight types, and embedding-row lookup.
#include <algorithm>
#include <cassert>

#include "engine/cpu/backend-cpu.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/packed-weights.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cpu {

void op_get_rows(thread_pool& pool, const tensor& table, const tensor& ids, const tensor& out) {
  const type_kernels* k = kernels_for(table.type);
  assert(k && out.ne[0] == table.ne[0]);
  const int32_t* id = static_cast<const int32_t*>(ids.data);
  const int64_t cols = table.ne[0];
  const int64_t row_bytes = table.row_bytes();
  pool.parallel_for(
      ids.ne[0],
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const auto* src = static_cast<const uint8_t*>(table.data) + int64_t(id[i]) * row_bytes;
          k->to_float(src, static_cast<float*>(out.data) + i * cols, cols);
        }
      },
      cols);
}

namespace {

// Work items per chunk of parallel_for_dynamic: about 16 chunks per thread, so a slow thread
// costs at most a sixteenth of the product, and each chunk is long enough that taking it from
// the shared counter costs nothing.
int64_t chunk_of(int64_t n_items, int n_threads) {
  return std::max<int64_t>(1, n_items / (16 * int64_t(n_threads)));
}

// Each activation row of x converted once, by `convert`, into rows of `row_bytes` in the scratch.
const uint8_t* convert_rows(thread_pool& pool, scratch& s, const tensor& x, int64_t row_bytes,
                            from_float_fn convert) {
  const int64_t n_in = x.ne[0], n_tok = x.ne[1];
  if (s.converted.size() < size_t(row_bytes * n_tok)) s.converted.resize(size_t(row_bytes * n_tok));
  pool.parallel_for(
      n_tok,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          convert(static_cast<const float*>(x.data) + t * n_in, s.converted.data() + t * row_bytes,
                  n_in);
        }
      },
      n_in * 4);
  return s.converted.data();
}

// The product through a tile kernel (engine/cpu/gemm.h): work items are (block of tokens, tile of
// weight rows); for its tile a thread walks the block's tokens in tiles of max_cols, so a tile's
// rows stay in L1 while the block's tokens pass over them. A block of tokens is what fits in
// about a quarter of a core's L2 (k_x_block_bytes), so long prompts do not stream activations
// from L3 for every tile of rows; the weights are read once per block.
constexpr int64_t k_x_block_bytes = 256 << 10;

// The weights: tile i (rows i * max_rows ..) starts at wbase + i * tile_bytes, its rows w_stride
// apart (stored rows), or it is one packed group (packed_format).
struct tiled_weights {
  const uint8_t* wbase;
  int64_t tile_bytes;
  int64_t w_stride;
};

void mul_mat_tiled(thread_pool& pool, scratch& s, const gemm_kernel& g, const tiled_weights& tw,
                   const tensor& w, const tensor& x, const tensor* bias, const tensor& out) {
  const int64_t n_in = w.ne[0];
  const int64_t n_out = w.ne[1];
  const int64_t n_tok = x.ne[1];
  const int64_t x_row_bytes = g.x_row_bytes(n_in);
  const uint8_t* xbase = convert_rows(pool, s, x, x_row_bytes, g.x_from_float);

  float* y = static_cast<float*>(out.data);
  const int64_t n_tiles = (n_out + g.max_rows - 1) / g.max_rows;
  const int64_t block =
      std::max<int64_t>(g.max_cols, k_x_block_bytes / x_row_bytes / g.max_cols * g.max_cols);
  const int64_t n_blocks = (n_tok + block - 1) / block;
  pool.parallel_for_dynamic(
      n_blocks * n_tiles, chunk_of(n_tiles, pool.n_threads()),
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t tile = item % n_tiles, r0 = tile * g.max_rows;
          const int64_t t_end = std::min(n_tok, (item / n_tiles + 1) * block);
          const int nr = int(std::min<int64_t>(g.max_rows, n_out - r0));
          for (int64_t t0 = item / n_tiles * block; t0 < t_end; t0 += g.max_cols) {
            const int nc = int(std::min<int64_t>(g.max_cols, t_end - t0));
            g.tile(n_in, tw.wbase + tile * tw.tile_bytes, tw.w_stride, xbase + t0 * x_row_bytes,
                   x_row_bytes, y + t0 * n_out + r0, n_out, nr, nc);
          }
        }
      },
      g.max_rows * n_in * std::min(n_tok, block));
  if (bias) {
    const float* b = static_cast<const float*>(bias->data);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t r = 0; r < n_out; ++r) y[t * n_out + r] += b[r];
  }
}

}  // namespace

void op_mul_mat(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& w,
                const tensor& x, const tensor* bias, const tensor& out) {
  assert(x.ne[0] == w.ne[0] && out.ne[0] == w.ne[1] && out.ne[1] == x.ne[1]);
  // A packed layout serves every token count: its tiles do no per-row unpacking.
  if (const packed_view p = packed.get(pool, w); p.format) {
    mul_mat_tiled(pool, s, p.format->kernel, {p.data, p.group_bytes, 0}, w, x, bias, out);
    return;
  }
  // One token (decoding) streams each weight row once: the AVX2 dot products do that at memory
  // speed with less work per row than a tile's unpacking, which pays off from two tokens on.
  const gemm_kernel* g = x.ne[1] > 1 ? gemm_kernel_for(w.type) : nullptr;
  if (g) {
    const int64_t row_bytes = w.row_bytes();
    mul_mat_tiled(pool, s, *g,
                  {static_cast<const uint8_t*>(w.data), g->max_rows * row_bytes, row_bytes}, w, x,
                  bias, out);
    return;
  }
  const type_kernels* k = kernels_for(w.type);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  const int64_t n_in = w.ne[0];
  const int64_t n_out = w.ne[1];
  const int64_t n_tok = x.ne[1];
  assert(x.ne[0] == n_in && out.ne[0] == n_out && out.ne[1] == n_tok);

  // Convert each activation row once to the dot-product type of the weights.
  const int64_t x_row_bytes = tensor_type_row_bytes(k->vec_dot_type, n_in);
  const void* xq = k->vec_dot_type == tensor_type::f32
                       ? x.data
                       : convert_rows(pool, s, x, x_row_bytes, xk->from_float);

  const int64_t w_row_bytes = w.row_bytes();
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  const auto* xbase = static_cast<const uint8_t*>(xq);
  float* y = static_cast<float*>(out.data);
  const float* b = bias ? static_cast<const float*>(bias->data) : nullptr;

  // Each thread takes a band of weight rows and walks tokens inside a block of rows, so a
  // block of weight rows is read from memory once per block of tokens.
  constexpr int64_t k_row_block = 16;
  constexpr int64_t k_tok_block = 64;
  auto row_blocks = [&](int64_t begin, int64_t end) {
    for (int64_t rb = begin; rb < end; ++rb) {
      const int64_t r0 = rb * k_row_block;
      const int64_t r1 = std::min(n_out, r0 + k_row_block);
      for (int64_t t0 = 0; t0 < n_tok; t0 += k_tok_block) {
        const int64_t t1 = std::min(n_tok, t0 + k_tok_block);
        for (int64_t r = r0; r < r1; ++r) {
          const uint8_t* wr = wbase + r * w_row_bytes;
          const float br = b ? b[r] : 0.0f;
          for (int64_t t = t0; t < t1; ++t)
            y[t * n_out + r] = k->vec_dot(n_in, wr, xbase + t * x_row_bytes) + br;
        }
      }
    }
  };
  const int64_t n_blocks = (n_out + k_row_block - 1) / k_row_block;
  pool.parallel_for_dynamic(n_blocks, chunk_of(n_blocks, pool.n_threads()), row_blocks,
                            k_row_block * n_in * n_tok);
}

}  // namespace hearth::cpu
