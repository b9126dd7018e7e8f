#include "engine/cpu/packed-weights.h"

#include <new>

namespace hearth::cpu {

packed_view packed_weights::get(thread_pool& pool, const tensor& w) {
  auto it = packed_.find(w.data);
  if (it != packed_.end() && it->second.type == w.type && it->second.ne0 == w.ne[0] &&
      it->second.ne1 == w.ne[1])
    return it->second.view;
  const packed_format* f = w.ne[2] == 1 && w.ne[3] == 1 ? packed_format_for(w.type) : nullptr;
  if (!f) return {};

  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  const int64_t group_bytes = f->group_bytes(n_in);
  const int64_t n_groups = (n_out + f->group_rows - 1) / f->group_rows;
  const size_t bytes = (size_t(group_bytes * n_groups) + 63) / 64 * 64;
  std::unique_ptr<uint8_t, free_deleter> mem(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  if (!mem) throw std::bad_alloc();
  const auto* src = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.row_bytes();
  uint8_t* dst = mem.get();
  pool.parallel_for(
      n_groups,
      [&](int64_t begin, int64_t end) {
        for (int64_t g = begin; g < end; ++g) {
          const int64_t r0 = g * f->group_rows;
          const int nr = int(std::min<int64_t>(f->group_rows, n_out - r0));
          f->pack(src + r0 * row_bytes, row_bytes, n_in, nr, dst + g * group_bytes);
        }
      },
      group_bytes);
  entry e{w.type, n_in, n_out, packed_view{f, dst, group_bytes}, std::move(mem)};
  const packed_view v = e.view;
  packed_[w.data] = std::move(e);
  return v;
}

}  // namespace hearth::cpu
