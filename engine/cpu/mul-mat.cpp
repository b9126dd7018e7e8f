// Matrix products on stored weight types, and embedding-row lookup.
#include <algorithm>
#include <array>
#include <cassert>
#include <span>

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

// Each activation row of x converted once, by `convert`, into rows of `row_bytes` in `dst`.
const uint8_t* convert_rows(thread_pool& pool, std::vector<uint8_t>& dst, const tensor& x,
                            int64_t row_bytes, from_float_fn convert) {
  const int64_t n_in = x.ne[0], n_tok = x.ne[1];
  if (dst.size() < size_t(row_bytes * n_tok)) dst.resize(size_t(row_bytes * n_tok));
  pool.parallel_for(
      n_tok,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          convert(static_cast<const float*>(x.data) + t * n_in, dst.data() + t * row_bytes, n_in);
        }
      },
      n_in * 4);
  return dst.data();
}

// Products through a tile kernel (engine/cpu/gemm.h): work items are (block of tokens, tile of
// weight rows); for its tile a thread walks the block's tokens in tiles of max_cols, so a tile's
// rows stay in L1 while the block's tokens pass over them. A block of tokens is what fits in
// about a quarter of a core's L2 (k_x_block_bytes), so long prompts do not stream activations
// from L3 for every tile of rows; the weights are read once per block.
constexpr int64_t k_x_block_bytes = 256 << 10;

// One product of a tiled call. The weights: tile i (rows i * max_rows ..) starts at
// wbase + i * tile_bytes, its rows w_stride apart (stored rows), or it is one packed group.
struct tiled_product {
  const gemm_kernel* g = nullptr;
  const uint8_t* wbase = nullptr;
  int64_t tile_bytes = 0;
  int64_t w_stride = 0;
  const tensor* w = nullptr;
  const tensor* bias = nullptr;
  const tensor* out = nullptr;
  // Filled by mul_mat_tiled: the converted activations, the tiling, the first work item.
  const uint8_t* xbase = nullptr;
  int64_t x_row_bytes = 0, n_tiles = 0, block = 0, first_item = 0;
};

// w's tile kernel and weights when a tile kernel takes it (g stays null when not): its packed
// layout's, else its stored layout's, for every token count. One token through the same kernel
// as several keeps a token's outputs the same bits whatever shares its step (the node decodes
// many sequences at once, and a job gives what it gives alone): the dot products (vec_dot) add
// in another order. They did for F32 rows with a tail shorter than a vector (stories260K's n_ff
// is 172), by up to 4e-3 in its logits after 82 tokens, which changed a sampled continuation.
tiled_product tiled_for(thread_pool& pool, packed_weights& packed, const tensor& w) {
  tiled_product p;
  p.w = &w;
  if (const packed_view v = packed.get(pool, w); v.format) {
    p.g = &v.format->kernel;
    p.wbase = v.data;
    p.tile_bytes = v.group_bytes;
  } else if (const gemm_kernel* g = gemm_kernel_for(w.type)) {
    p.g = g;
    p.wbase = static_cast<const uint8_t*>(w.data);
    p.w_stride = w.row_bytes();
    p.tile_bytes = g->max_rows * p.w_stride;
  }
  return p;
}

// The products of x in `ps` (each with a tile kernel) as one pass of the thread pool: the
// activations converted once per kernel format, then every product's work items from one shared
// counter, so the threads wait once for the slowest, not once per product.
void mul_mat_tiled(thread_pool& pool, scratch& s, const tensor& x, std::span<tiled_product> ps) {
  const int64_t n_tok = x.ne[1];
  int64_t n_items = 0, n_tiles = 0, work = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    tiled_product& p = ps[i];
    const gemm_kernel& g = *p.g;
    const int64_t n_in = p.w->ne[0];
    p.x_row_bytes = g.x_row_bytes(n_in);
    for (size_t j = 0; j < i && !p.xbase; ++j) {
      if (ps[j].g->x_from_float == g.x_from_float && ps[j].x_row_bytes == p.x_row_bytes)
        p.xbase = ps[j].xbase;
    }
    if (!p.xbase) {
      if (s.converted_sets.size() <= i) s.converted_sets.resize(i + 1);
      p.xbase = convert_rows(pool, s.converted_sets[i], x, p.x_row_bytes, g.x_from_float);
    }
    p.n_tiles = (p.w->ne[1] + g.max_rows - 1) / g.max_rows;
    p.block =
        std::max<int64_t>(g.max_cols, k_x_block_bytes / p.x_row_bytes / g.max_cols * g.max_cols);
    p.first_item = n_items;
    n_items += (n_tok + p.block - 1) / p.block * p.n_tiles;
    n_tiles += p.n_tiles;
    work += p.n_tiles * g.max_rows * n_in * n_tok;
  }
  if (n_items == 0) return;  // no tokens
  pool.parallel_for_dynamic(
      n_items, pool.tail_chunk(n_tiles),
      [&](int64_t begin, int64_t end) {
        size_t i = 0;
        for (int64_t item = begin; item < end; ++item) {
          while (i + 1 < ps.size() && item >= ps[i + 1].first_item) ++i;
          const tiled_product& p = ps[i];
          const gemm_kernel& g = *p.g;
          const int64_t n_in = p.w->ne[0], n_out = p.w->ne[1];
          const int64_t local = item - p.first_item;
          const int64_t tile = local % p.n_tiles, r0 = tile * g.max_rows;
          const int64_t t_end = std::min(n_tok, (local / p.n_tiles + 1) * p.block);
          const int nr = int(std::min<int64_t>(g.max_rows, n_out - r0));
          float* y = static_cast<float*>(p.out->data);
          for (int64_t t0 = local / p.n_tiles * p.block; t0 < t_end; t0 += g.max_cols) {
            const int nc = int(std::min<int64_t>(g.max_cols, t_end - t0));
            g.tile(n_in, p.wbase + tile * p.tile_bytes, p.w_stride, p.xbase + t0 * p.x_row_bytes,
                   p.x_row_bytes, y + t0 * n_out + r0, n_out, nr, nc);
          }
        }
      },
      (work + n_items - 1) / n_items);
  for (const tiled_product& p : ps) {
    if (!p.bias) continue;
    const int64_t n_out = p.w->ne[1];
    const float* b = static_cast<const float*>(p.bias->data);
    float* y = static_cast<float*>(p.out->data);
    for (int64_t t = 0; t < n_tok; ++t)
      for (int64_t r = 0; r < n_out; ++r) y[t * n_out + r] += b[r];
  }
}

// The product through vec_dot, one output at a time: types and CPUs without a tile kernel.
void mul_mat_vec_dot(thread_pool& pool, scratch& s, const tensor& w, const tensor& x,
                     const tensor* bias, const tensor& out) {
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
                       : convert_rows(pool, s.converted, x, x_row_bytes, xk->from_float);

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
  pool.parallel_for_dynamic(n_blocks, pool.tail_chunk(n_blocks), row_blocks,
                            k_row_block * n_in * n_tok);
}

}  // namespace

void op_mul_mat(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& w,
                const tensor& x, const tensor* bias, const tensor& out) {
  const backend::product p{&w, bias, &out};
  op_mul_mats(pool, s, packed, x, {&p, 1});
}

void op_mul_mats(thread_pool& pool, scratch& s, packed_weights& packed, const tensor& x,
                 std::span<const backend::product> products) {
  // At most a few products (q, k, v) share activations; more run in batches of that many.
  constexpr size_t k_max = 4;
  for (size_t first = 0; first < products.size(); first += k_max) {
    std::array<tiled_product, k_max> tiled;
    size_t n_tiled = 0;
    for (size_t i = first; i < std::min(products.size(), first + k_max); ++i) {
      const backend::product& p = products[i];
      assert(x.ne[0] == p.w->ne[0] && p.out->ne[0] == p.w->ne[1] && p.out->ne[1] == x.ne[1]);
      tiled_product t = tiled_for(pool, packed, *p.w);
      if (t.g) {
        t.bias = p.bias;
        t.out = p.out;
        tiled[n_tiled++] = t;
      } else {
        mul_mat_vec_dot(pool, s, *p.w, x, p.bias, *p.out);
      }
    }
    if (n_tiled) mul_mat_tiled(pool, s, x, {tiled.data(), n_tiled});
  }
}

}  // namespace hearth::cpu
