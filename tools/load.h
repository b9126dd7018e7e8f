// Loading a model from the CLI: on the backend --backend/--device ask for (backends/select.h), with
// a progress bar for large files.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backends/select.h"
#include "engine/model.h"

namespace hearth::cli {

// --backend cpu|cuda|vulkan|auto and --device N, shared by run, eval and bench.
struct backend_options {
  std::string backend = "cpu";
  int device = -1;
  CLI::Option* device_opt = nullptr;
};
void add_backend_options(CLI::App* cmd, backend_options& o);

// Loads `path` on the backend `o` asks for with `threads` CPU threads (<= 0: all), checking that
// a device has room for a context of `n_ctx` tokens (0: the model's, at most 4096). When it runs
// elsewhere than asked, says why in one line on stderr ("vulkan: ...; running on the CPU").
// Shows a progress bar on stderr while the weights are paged in if stderr is a terminal and the
// file is larger than 64 MiB.
gpu::loaded_model load_model(const std::string& path, const backend_options& o, int threads,
                             int32_t n_ctx);

// "cpu", or "vulkan (llvmpipe (LLVM 15.0.6, 256 bits))": where a loaded model runs.
std::string backend_text(const gpu::loaded_model& m);

// "1,2,3" -> {1, 2, 3}; throws naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& s);

}  // namespace hearth::cli
