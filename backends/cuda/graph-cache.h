// Instantiated CUDA graphs of recorded steps, keyed by the step's ops (op-record.h). A decoding
// step repeats the same kernels on the same buffers with only the cell count changing, which the
// kernels read from device memory; so a graph captured once replays every later step of the same
// batch size. A few keys are kept (batch sizes come and go with continuous batching), the least
// recently used going first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/function-ref.h"

namespace hearth::cuda {

class graph_cache {
 public:
  explicit graph_cache(size_t capacity = 8) : capacity_(capacity) {}
  ~graph_cache();
  graph_cache(const graph_cache&) = delete;
  graph_cache& operator=(const graph_cache&) = delete;

  static uint64_t hash(const std::vector<int64_t>& key);

  // The graph cached under `key`, or nullptr.
  cudaGraphExec_t find(const std::vector<int64_t>& key, uint64_t h);

  // Captures what `enqueue` puts on stream `s` (without running it), instantiates it and caches
  // it under `key`. Returns nullptr, with `error` saying why, when capture or instantiation
  // fails; the stream is then out of capture mode and nothing was enqueued.
  cudaGraphExec_t capture(cudaStream_t s, const std::vector<int64_t>& key, uint64_t h,
                          function_ref<void()> enqueue, std::string& error);

  // Destroys every cached graph (after the buffers they name changed).
  void clear();
  size_t size() const { return entries_.size(); }

 private:
  struct entry {
    uint64_t hash = 0;
    std::vector<int64_t> key;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_used = 0;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<entry> entries_;
};

}  // namespace hearth::cuda
