// Broken backend modules for backends/registry_test.cpp and tests/backend_modules_test.cpp, built
// as libhearth-cuda.so in folders of their own (backends/CMakeLists.txt):
//   HEARTH_FIXTURE_NEEDS_HIDDEN: needs a library that the loader cannot find, as the real CUDA
//     module does on a machine without libcublas.so.13;
//   else: built for another module API version.
#include "backends/module.h"

#ifdef HEARTH_FIXTURE_NEEDS_HIDDEN
extern "C" int hearth_fixture_hidden_value();  // libhearth_fixture_hidden.so, not on any path
#endif

extern "C" __attribute__((visibility("default"))) const hearth::gpu::backend_module*
hearth_backend_module_init() {
  static hearth::gpu::backend_module m;
  m.kind = hearth::gpu::backend_kind::cuda;
  m.title = "CUDA";
#ifdef HEARTH_FIXTURE_NEEDS_HIDDEN
  m.api_version = uint32_t(hearth_fixture_hidden_value());
#else
  m.api_version = hearth::gpu::backend_module_api_version + 1000;
#endif
  return &m;
}
