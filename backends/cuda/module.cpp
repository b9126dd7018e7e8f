// The CUDA backend as a loadable module (libhearth-cuda.so, backends/module.h). It links the CUDA
// runtime statically and cuBLAS dynamically: where libcublas or the NVIDIA driver is missing,
// dlopen or devices() says so and the process goes on without CUDA.
#include "backends/module.h"
#include "backends/cuda/backend-cuda.h"
#include "backends/cuda/device.h"

namespace hearth::cuda {
namespace {

std::vector<gpu::device> module_devices(std::string& why_none) {
  std::vector<gpu::device> out = devices();
  if (out.empty()) why_none = unavailable_reason();
  return out;
}

std::unique_ptr<backend> module_make(int index) {
  cuda_options o;
  o.device = index;
  return make_cuda_backend(o);
}

}  // namespace
}  // namespace hearth::cuda

extern "C" __attribute__((visibility("default"))) const hearth::gpu::backend_module*
hearth_backend_module_init() {
  static const hearth::gpu::backend_module m = [] {
    hearth::gpu::backend_module d;
    d.kind = hearth::gpu::backend_kind::cuda;
    d.title = "CUDA";
    d.devices = hearth::cuda::module_devices;
    d.make = hearth::cuda::module_make;
    return d;
  }();
  return &m;
}
