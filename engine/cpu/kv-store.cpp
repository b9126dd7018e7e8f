#include <cassert>
#include <cstring>

#include "engine/cpu/backend-cpu.h"
#include "engine/cpu/vec-dot.h"

namespace hearth::cpu {

void op_kv_store(thread_pool& pool, const tensor& src, const tensor& cells, const tensor& cache) {
  const type_kernels* k = kernels_for(cache.type);
  assert(k && src.ne[0] == cache.ne[0]);
  const int32_t* cell = static_cast<const int32_t*>(cells.data);
  const int64_t cols = src.ne[0];
  const int64_t row_bytes = cache.row_bytes();
  pool.parallel_for(
      src.ne[1],
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          k->from_float(static_cast<const float*>(src.data) + t * cols,
                        static_cast<uint8_t*>(cache.data) + int64_t(cell[t]) * row_bytes, cols);
        }
      },
      cols * 4);
}

}  // namespace hearth::cpu
