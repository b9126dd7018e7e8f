// Choosing the backend a model runs on: the CPU, or a CUDA or Vulkan device of the registry
// (backends/registry.h) when one is asked for (or, with `auto`, the best GPU of any backend).
// Everything that could make a device unfit is checked at load, before any job runs: no device, a
// weight type the device has no kernel for, too little device memory for the weights and the cache,
// the backend failing to start or to take the weights. Any of these falls back to the CPU backend
// and says why in one line, for the CLI to print and the node to log. The engine knows nothing of
// this: it gets the chosen backend through model_params::make_backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "engine/backend.h"
#include "engine/context.h"
#include "engine/io/gguf.h"
#include "engine/model.h"

namespace hearth::gpu {

// What the caller asks for.
struct backend_choice {
  backend_kind kind = backend_kind::cpu;
  int device = -1;            // index into the device list (`hearth devices`); -1: the best
  int threads = 0;            // CPU backend threads; <= 0: one per hardware thread
  int32_t n_ctx_per_seq = 0;  // cache cells per sequence; 0: the model's (at most 4096)
  int32_t n_seq = 1;          // sequences (node slots): the cache holds n_seq × n_ctx_per_seq
};

// The device `choice` asks for before any model is known, from the registry: the one named by
// choice.device, else the best by device_better (backends/device.h). With `automatic`, every GPU
// backend is considered and CPU implementations are never picked on their own.
struct backend_plan {
  backend_kind backend = backend_kind::cpu;  // cpu, vulkan or cuda (never automatic)
  std::string backend_name = "cpu";          // its registry entry's name, for notes and logs
  int device = -1;                           // on a device backend: its index
  std::string device_name;
  uint64_t device_memory = 0;  // what the model may take: free memory where known, else total
  std::string note;            // why it is the CPU when something else was asked for; "" otherwise
};
backend_plan backend_plan_for(const backend_choice& choice, const registry& devices);

// Cache cells per sequence: `n_ctx_per_seq` when it is given (> 0), else the model's context (at
// most 4096, engine/context.h context_params_resolved). The one rule for the size of a node's
// slot and of placement's sequences.
int32_t context_per_seq(const model_hparams& hp, int32_t n_ctx_per_seq);
// The context placement sizes the cache for: n_seq × context_per_seq(hp, n_ctx_per_seq) cells,
// n_seq sequences.
context_params device_context_params(const model_hparams& hp, int32_t n_ctx_per_seq, int32_t n_seq);
// What the opened model needs on a device with that context (engine/context.h memory_needed),
// before anything is uploaded.
memory_estimate device_memory_needed(const model_file& f, int32_t n_ctx_per_seq, int32_t n_seq);

// Weight types of matrices in `f` (every tensor of two or more dimensions) that `b` has no
// kernel for, by name ("q4_k"), each once.
std::vector<std::string> unsupported_weight_types(const gguf_file& f, const backend& b);

struct loaded_model {
  std::unique_ptr<hearth::model> model;
  std::string backend = "cpu";  // where it runs: "cpu" or the registry entry's name
  int device = -1;              // the device index, -1 on the CPU
  std::string device_name;      // "" on the CPU
  // One line when the model runs elsewhere than asked ("vulkan: llvmpipe (...) has no q4_k
  // matrix kernel yet; running on the CPU"), or when its context was cut to fit the device;
  // "" when the choice was honoured as asked.
  std::string note;
  // Cache cells per sequence the device has room for, when the caller left the context to the
  // model (n_ctx_per_seq 0) and the model's default did not fit; 0: as asked.
  int32_t n_ctx_per_seq = 0;
};

// Loads `path` on the backend `choice` asks for, falling back to the CPU backend (and saying
// why in `note`) when the device cannot run it. The KV cache is sized from the device's free
// memory: with n_ctx_per_seq 0, a model whose default context does not fit gets the largest
// that does (a multiple of 256 cells, at least 256; `n_ctx_per_seq` and `note` say so).
// `params` carries the progress callback; its make_backend and n_threads are set here. The model
// is opened once (model_file::open): the fit is checked against it and it is loaded from it.
// Errors of the model itself (a missing file, an unsupported architecture) throw as model::load
// does.
loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params, const registry& devices);
// The same on this process's registry (device_registry()).
loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params = {});
// The same from a handle already opened (model_file::open with its weights; the node's catalog
// scan opened it): nothing is opened again.
loaded_model load_model_on(model_file file, const backend_choice& choice,
                           const model_params& params, const registry& devices);
loaded_model load_model_on(model_file file, const backend_choice& choice,
                           const model_params& params = {});

}  // namespace hearth::gpu
