#include "backends/cuda/graph-cache.h"

#include <algorithm>
#include <exception>

namespace hearth::cuda {

graph_cache::~graph_cache() {
  clear();
}

uint64_t graph_cache::hash(const std::vector<int64_t>& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 64-bit words
  for (int64_t v : key) {
    h ^= uint64_t(v);
    h *= 1099511628211ull;
  }
  return h;
}

cudaGraphExec_t graph_cache::find(const std::vector<int64_t>& key, uint64_t h) {
  for (entry& e : entries_) {
    if (e.hash == h && e.key == key) {
      e.last_used = ++clock_;
      return e.exec;
    }
  }
  return nullptr;
}

cudaGraphExec_t graph_cache::capture(cudaStream_t s, const std::vector<int64_t>& key, uint64_t h,
                                     function_ref<void()> enqueue, std::string& error) {
  // Thread-local mode: other threads (another model's backend in the node) may keep calling
  // the runtime while this thread captures.
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    cudaGetLastError();
    error = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(e);
    return nullptr;
  }
  std::string thrown;
  try {
    enqueue();
  } catch (const std::exception& ex) {
    thrown = ex.what();
  }
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(s, &graph);
  if (!thrown.empty() || e != cudaSuccess || !graph) {
    cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    error = !thrown.empty() ? thrown : std::string("capturing a step: ") + cudaGetErrorString(e);
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    error = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
    return nullptr;
  }
  if (entries_.size() >= capacity_) {
    auto lru =
        std::min_element(entries_.begin(), entries_.end(),
                         [](const entry& a, const entry& b) { return a.last_used < b.last_used; });
    cudaGraphExecDestroy(lru->exec);
    entries_.erase(lru);
  }
  entries_.push_back({h, key, exec, ++clock_});
  return exec;
}

void graph_cache::clear() {
  for (entry& e : entries_) cudaGraphExecDestroy(e.exec);
  entries_.clear();
}

}  // namespace hearth::cuda
