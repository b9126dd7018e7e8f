#include "engine/cpu/packed-weights.h"

#include <new>

namespace hearth::cpu {

packed_view packed_weights::get(thread_pool& pool, const tensor& w) {
  auto it = packed_.find(w.data);
  if (it != packed_.end() && it->second.type == w.type && it->second.ne0 == w.ne[0] &&
      it->second.ne1 == w.ne[1] && it->second.ne2 == w.ne[2])
    return it->second.view;
  const packed_format* f = w.ne[3] == 1 ? packed_format_for(w.type) : nullptr;
  if (!f) return {};

  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_matrix = w.ne[2];
  const int64_t group_bytes = f->group_bytes(n_in);
  const int64_t groups_per_matrix = (n_out + f->group_rows - 1) / f->group_rows;
  const int64_t matrix_bytes = groups_per_matrix * group_bytes;
  const size_t bytes = (size_t(matrix_bytes * n_matrix) + 63) / 64 * 64;
  std::unique_ptr<uint8_t, free_deleter> mem(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  if (!mem) throw std::bad_alloc();
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.row_bytes();
  uint8_t* dst = mem.get();
  pool.parallel_for(
      groups_per_matrix * n_matrix,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t m = i / groups_per_matrix, r0 = i % groups_per_matrix * f->group_rows;
          const int nr = int(std::min<int64_t>(f->group_rows, n_out - r0));
          f->pack(src + (m * n_out + r0) * row_bytes, row_bytes, n_in, nr, dst + i * group_bytes);
        }
      },
      group_bytes);
  entry e{w.type,        n_in, n_out, n_matrix, packed_view{f, dst, group_bytes, matrix_bytes},
          std::move(mem)};
  const packed_view v = e.view;
  packed_[w.data] = std::move(e);
  return v;
}

}  // namespace hearth::cpu
