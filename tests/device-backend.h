// The device backend a device test binary is built for, and a backend on its best device through
// the device registry (as the programs reach the backends: their modules). tests/CMakeLists.txt
// builds backend_ops_test.cpp and conformance_device_test.cpp once per backend, defining
// HEARTH_DEVICE_TEST_VULKAN or HEARTH_DEVICE_TEST_CUDA.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "backends/registry.h"
#include "engine/backend.h"
#include "engine/model.h"

namespace hearth::testing {

#ifdef HEARTH_DEVICE_TEST_VULKAN
inline constexpr gpu::backend_kind device_backend_kind = gpu::backend_kind::vulkan;
#elif defined(HEARTH_DEVICE_TEST_CUDA)
inline constexpr gpu::backend_kind device_backend_kind = gpu::backend_kind::cuda;
#else
#error "define the backend under test"
#endif

// A backend on the best device of the backend under test; nullptr when it has none.
inline std::unique_ptr<backend> best_device_backend() {
  gpu::device d;
  const gpu::backend_entry* e = nullptr;
  if (!gpu::device_registry().best(device_backend_kind, d, e)) return nullptr;
  return e->make(d.index);
}

// Loading on the backend's best device, from its module through the device registry; what the
// backend throws fails the load.
inline model_params on_device() {
  model_params p;
  p.make_backend = []() -> std::unique_ptr<backend> {
    auto b = best_device_backend();
    if (!b)
      throw std::runtime_error(std::string(gpu::backend_kind_name(device_backend_kind)) +
                               ": no device");
    return b;
  };
  return p;
}

}  // namespace hearth::testing
