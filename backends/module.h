// The interface between the core (the executables) and a GPU backend built as a loadable module
// (libhearth-vulkan.so, libhearth-cuda.so), in the spirit of ggml's GGML_BACKEND_DL: the module
// exports one extern "C" function, hearth_backend_module_init, returning its description; the
// core (backends/modules.cpp) finds the file, dlopens it, checks api_version and device_size before
// touching anything else, and registers the backend (backends/registry.h).
//
// The description passes C++ objects (std::string, std::vector, std::unique_ptr<backend>) across
// the boundary: modules are built with the same compiler and standard library as the core, in
// the same build; api_version (bumped whenever this file, backends/device.h or engine/backend.h
// changes shape) and device_size catch a module from another build.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "engine/backend.h"

namespace hearth::gpu {

inline constexpr uint32_t backend_module_api_version = 1;

struct backend_module {
  uint32_t api_version = backend_module_api_version;  // first: read before anything else
  uint32_t device_size = sizeof(device);
  backend_kind kind = backend_kind::cpu;
  const char* title = "";  // "Vulkan", "CUDA": the backend's name in sentences
  // The devices, enumerated now (free memory as of now); never throws. When there are none,
  // `why_none` says why in a few words ("no NVIDIA driver (libcuda) found").
  std::vector<device> (*devices)(std::string& why_none) = nullptr;
  // A backend on device `index` of devices(). Throws std::runtime_error with one line when the
  // device cannot be used (the caller falls back to the CPU).
  std::unique_ptr<backend> (*make)(int index) = nullptr;
};

}  // namespace hearth::gpu

// What each module exports (and nothing else: see backends/CMakeLists.txt, hearth_backend_module).
#define HEARTH_BACKEND_MODULE_INIT "hearth_backend_module_init"
extern "C" {
using hearth_backend_module_init_fn = const hearth::gpu::backend_module* (*)();
}
