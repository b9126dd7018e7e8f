// Weights in a kernel's own layout (packed_format, engine/cpu/gemm.h), made from the stored rows
// the first time a matrix product uses them and kept until the backend frees the tensor or ends.
// Made on first use, not at load, because only the backend's products know a tensor is a matrix
// of products: an embedding table that only get_rows reads is never packed, and a table tied to
// the output projection is packed once, for the product. Packing is a pass over the weights with
// every thread, during the first forward pass, which context::warm_up runs at load (TinyLlama-1.1B
// Q4_K_M, 636 MB: a whole one-token `hearth run` took 0.37-1.10 s packed against 0.44-0.53 s with
// HEARTH_CPU_NO_PACK=1, four runs each, file in the page cache).
// Memory: the packed copy is anonymous memory the size of the stored rows (Q4_K: 148 bytes per
// row and super-block instead of 144), in transparent huge pages where it spans them; the stored
// rows' pages are handed back once packed (MADV_PAGEOUT, which keeps their contents).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "engine/backend.h"
#include "engine/cpu/gemm.h"
#include "engine/thread-pool.h"

namespace hearth::cpu {

// A packed weight: group g of `format->group_rows` rows starts at data + g * group_bytes; the
// matrices of a stack (experts, ne[2] > 1) are packed one after another, matrix_bytes apart.
struct packed_view {
  const packed_format* format = nullptr;
  const uint8_t* data = nullptr;
  int64_t group_bytes = 0;
  int64_t matrix_bytes = 0;
};

class packed_weights {
 public:
  // w's packed copy, made now if there is none yet; format null when w's type has no packed
  // layout on this CPU.
  packed_view get(thread_pool& pool, const tensor& w);
  // Drops the packed copy of the tensor at `data` (its memory is being freed or reused).
  void forget(const void* data) { packed_.erase(data); }

 private:
  struct free_deleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct entry {
    tensor_type type;
    int64_t ne0, ne1, ne2;
    packed_view view;
    std::unique_ptr<uint8_t, free_deleter> bytes;
  };
  std::unordered_map<const void*, entry> packed_;
};

}  // namespace hearth::cpu
