// The CUDA backend (issue 7): every op of engine/backend.h on an NVIDIA GPU. Weights are uploaded
// once at load; ops are recorded as they are called and launched on one stream when results are
// needed (download, synchronize, or an upload that must come after them). A step that repeats
// (the same ops on the same tensors: every decoding step of a batch size) is captured once into
// a CUDA graph and replayed, so launching ~10 kernels per layer costs one launch per token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "engine/backend.h"

namespace hearth {

struct cuda_options {
  int device = 0;  // index into cuda::devices() (the registry picks the best: backends/registry.h)
  // Replay repeated steps from CUDA graphs. HEARTH_CUDA_NO_GRAPHS=1 in the environment turns
  // them off too (for comparing, and for tools that trace single kernels).
  bool graphs = true;
};

// A backend on the chosen device. Throws std::runtime_error (cuda::cuda_error) with ONE
// informative line when there is no usable device, the build has no kernels for its
// architecture, or the device runs out of memory; the caller then falls back to the CPU.
std::unique_ptr<backend> make_cuda_backend(const cuda_options& o);

// Counters of the step recorder, for tests and `hearth bench`: how steps were run.
struct cuda_step_stats {
  uint64_t steps = 0;          // flushes that ran at least one op
  uint64_t graph_replays = 0;  // steps replayed from a cached graph
  uint64_t graph_captures = 0;
  uint64_t ops = 0;  // ops launched (one replay counts all of its ops)
};
// The counters of a backend made by make_cuda_backend (zeros for any other backend).
cuda_step_stats cuda_stats(const backend& b);

}  // namespace hearth
