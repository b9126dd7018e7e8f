#include "engine/cpu/packed-weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace hearth::cpu {

packed_view packed_weights::get(thread_pool& pool, const tensor& w) {
  // The type first: products on types with no packed layout (F32, Q5_0, ...) skip the lookup.
  const packed_format* f = w.ne[3] == 1 ? packed_format_for(w.type) : nullptr;
  if (!f) return {};
  auto it = packed_.find(w.data);
  if (it != packed_.end() && it->second.type == w.type && it->second.ne0 == w.ne[0] &&
      it->second.ne1 == w.ne[1] && it->second.ne2 == w.ne[2])
    return it->second.view;

  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_matrix = w.ne[2];
  const int64_t group_bytes = f->group_bytes(n_in);
  const int64_t groups_per_matrix = (n_out + f->group_rows - 1) / f->group_rows;
  const int64_t matrix_bytes = groups_per_matrix * group_bytes;
  // Aligned to 2 MiB, and the whole 2 MiB pages inside asked to be huge pages before anything is
  // written (transparent huge pages in "madvise" mode, Debian's default): decoding streams every
  // weight once per token, and with 4 KiB pages that is a TLB miss every 4 KiB. The tail past the
  // last whole huge page keeps small pages, so no memory is spent on rounding up.
  constexpr size_t k_huge = size_t(2) << 20;
  const size_t bytes = (size_t(matrix_bytes * n_matrix) + 63) / 64 * 64;
  void* p = nullptr;
  if (posix_memalign(&p, bytes >= k_huge ? k_huge : 64, bytes) != 0) throw std::bad_alloc();
  std::unique_ptr<uint8_t, free_deleter> mem(static_cast<uint8_t*>(p));
  if (bytes >= k_huge) madvise(p, bytes / k_huge * k_huge, MADV_HUGEPAGE);
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
  // The stored bytes are not read for products any more: hand their pages back (MADV_PAGEOUT
  // keeps the contents: a mapped file's pages are dropped and read again from the file if ever
  // needed, e.g. by get_rows of a tied embedding table; heap pages go to swap, or stay without
  // it). Otherwise the process holds the weights twice until the kernel needs the memory. Only
  // the whole pages inside the tensor: its neighbours may be in use.
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (uintptr_t(src) + page - 1) / page * page;
  const uintptr_t last = (uintptr_t(src) + uintptr_t(w.n_bytes())) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT);
  entry e{w.type,        n_in, n_out, n_matrix, packed_view{f, dst, group_bytes, matrix_bytes},
          std::move(mem)};
  const packed_view v = e.view;
  packed_[w.data] = std::move(e);
  return v;
}

}  // namespace hearth::cpu
