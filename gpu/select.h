// Choosing the backend a model runs on: the CPU, or a CUDA or Vulkan device when one is asked for
// (or, with `auto`, the machine's NVIDIA GPU through CUDA, else its Vulkan GPU). Everything that
// could make a device unfit is checked at load, before any job runs: no device, a weight type the
// device has no kernel for, too little device memory for the weights and the cache, the backend
// failing to start or to take the weights. Any of these falls back to the CPU backend and says why
// in one line, for the CLI to print and the node to log. The engine knows nothing of this: it gets
// the chosen backend through model_params::make_backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/context.h"
#include "engine/gguf.h"
#include "engine/model.h"

namespace hearth::gpu {

enum class backend_kind {
  cpu,        // the reference CPU backend
  vulkan,     // a Vulkan device (any type, lavapipe included)
  cuda,       // an NVIDIA GPU through CUDA
  automatic,  // a CUDA GPU if there is one, else a Vulkan GPU (not a CPU implementation such
              // as lavapipe)
};

// "cpu" | "vulkan" | "cuda" | "auto" -> kind; nullopt for anything else.
std::optional<backend_kind> backend_kind_from_name(const std::string& name);
const char* backend_kind_name(backend_kind k);

// What the caller asks for.
struct backend_choice {
  backend_kind kind = backend_kind::cpu;
  int device = -1;            // index into the device list (`hearth devices`); -1: the best
  int threads = 0;            // CPU backend threads; <= 0: one per hardware thread
  int32_t n_ctx_per_seq = 0;  // cache cells per sequence; 0: the model's (at most 4096)
  int32_t n_seq = 1;          // sequences (node slots): the cache holds n_seq × n_ctx_per_seq
};

// One device a device backend can run on.
struct backend_device {
  int index = 0;  // what backend_choice::device names
  std::string name;
  std::string vendor;
  std::string type;           // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_bytes = 0;  // device-local memory
  bool subgroup_arithmetic = false;
  // Free device memory when the driver says (CUDA); 0: unknown, memory_bytes counts instead.
  uint64_t memory_free = 0;
  std::string detail;  // backend-specific ("compute capability 9.0")
};

// Where devices and device backends come from: the CUDA or Vulkan backend of this build, or a
// fake in tests. `make` throws std::runtime_error with one line when the device cannot be used.
struct device_backend_source {
  std::string name;    // "vulkan", "cuda": the backend's name in reports and what --backend says
  std::string title;   // "Vulkan", "CUDA": the name in sentences
  bool built = false;  // false: this build has no such backend (devices() is then empty)
  std::function<std::vector<backend_device>()> devices;
  std::function<std::unique_ptr<backend>(int index)> make;
};

// The Vulkan backend of this build (built = false when the Vulkan SDK or glslc was missing).
device_backend_source vulkan_source();
// The CUDA backend of this build (built = false when nvcc was missing).
device_backend_source cuda_source();
// The source a kind loads from: cuda -> CUDA, vulkan -> Vulkan; automatic -> CUDA when this
// build has it and it finds a device, else Vulkan; cpu -> Vulkan (unused).
device_backend_source source_for(backend_kind k);

// The device `choice` asks for before any model is known: the one named by choice.device, else
// the best (discrete before integrated before virtual before other before a CPU implementation,
// then the most memory). With `automatic`, CPU implementations are never picked on their own.
struct backend_plan {
  std::string backend = "cpu";  // "cpu" or the source's name
  int device = -1;              // on a device backend: its index
  std::string device_name;
  uint64_t device_memory = 0;  // what the model may take: free memory where known, else total
  std::string note;            // why it is the CPU when something else was asked for; "" otherwise
};
backend_plan backend_plan_for(const backend_choice& choice, const device_backend_source& source);

// The context placement sizes the cache for: n_seq × n_ctx_per_seq cells (n_ctx_per_seq 0: the
// model's context, at most 4096), n_seq sequences.
context_params device_context_params(const model_hparams& hp, int32_t n_ctx_per_seq, int32_t n_seq);
// What the opened model needs on a device with that context (engine/context.h memory_needed),
// before anything is uploaded.
memory_estimate device_memory_needed(const model_file& f, int32_t n_ctx_per_seq, int32_t n_seq);

// Weight types of matrices in `f` (every tensor of two or more dimensions) that `b` has no
// kernel for, by name ("q4_k"), each once.
std::vector<std::string> unsupported_weight_types(const gguf_file& f, const backend& b);

struct loaded_model {
  std::unique_ptr<hearth::model> model;
  std::string backend = "cpu";  // where it runs: "cpu" or the device source's name
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
                           const model_params& params, const device_backend_source& source);
// The same from source_for(choice.kind).
loaded_model load_model_on(const std::string& path, const backend_choice& choice,
                           const model_params& params = {});

}  // namespace hearth::gpu
