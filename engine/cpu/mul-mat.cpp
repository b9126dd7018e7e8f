// Matrix products on stored weight types, and embedding-row lookup.
#include <algorithm>
#include <cassert>

#include "engine/cpu/backend-cpu.h"
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

void op_mul_mat(thread_pool& pool, scratch& s, const tensor& w, const tensor& x, const tensor* bias,
                const tensor& out) {
  const type_kernels* k = kernels_for(w.type);
  const type_kernels* xk = kernels_for(k->vec_dot_type);
  const int64_t n_in = w.ne[0];
  const int64_t n_out = w.ne[1];
  const int64_t n_tok = x.ne[1];
  assert(x.ne[0] == n_in && out.ne[0] == n_out && out.ne[1] == n_tok);

  // Convert each activation row once to the dot-product type of the weights.
  const int64_t x_row_bytes = tensor_type_row_bytes(k->vec_dot_type, n_in);
  const void* xq = x.data;
  if (k->vec_dot_type != tensor_type::f32) {
    if (s.converted.size() < size_t(x_row_bytes * n_tok))
      s.converted.resize(size_t(x_row_bytes * n_tok));
    pool.parallel_for(
        n_tok,
        [&](int64_t begin, int64_t end) {
          for (int64_t t = begin; t < end; ++t) {
            xk->from_float(static_cast<const float*>(x.data) + t * n_in,
                           s.converted.data() + t * x_row_bytes, n_in);
          }
        },
        n_in * 2);
    xq = s.converted.data();
  }

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
  pool.parallel_for((n_out + k_row_block - 1) / k_row_block, row_blocks,
                    k_row_block * n_in * n_tok);
}

}  // namespace hearth::cpu
