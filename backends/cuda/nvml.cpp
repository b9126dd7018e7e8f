#include "backends/cuda/nvml.h"

#include <dlfcn.h>

namespace hearth::cuda {
namespace {

// The few NVML declarations used, as nvml.h has them (an ABI NVIDIA keeps across drivers: new
// behaviour gets a new _vN name), so that the build needs no NVML header.
using nvml_return = int;  // nvmlReturn_t; NVML_SUCCESS is 0
constexpr nvml_return k_nvml_success = 0;
struct nvml_device_st;
using nvml_device = nvml_device_st*;  // nvmlDevice_t
struct nvml_utilization_rates {       // nvmlUtilization_t
  unsigned int gpu;                   // percent of the sample period a kernel ran
  unsigned int memory;                // percent of it device memory was read or written
};

struct nvml_library {
  nvml_return (*device_by_uuid)(const char*, nvml_device*) = nullptr;
  nvml_return (*utilization_rates)(nvml_device, nvml_utilization_rates*) = nullptr;

  nvml_library() {
    // Never dlclosed nor shut down: the node reads it every few seconds for as long as it runs.
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<nvml_return (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto by_uuid =
        reinterpret_cast<decltype(device_by_uuid)>(dlsym(lib, "nvmlDeviceGetHandleByUUID"));
    auto rates =
        reinterpret_cast<decltype(utilization_rates)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    if (!init || !by_uuid || !rates || init() != k_nvml_success) return;
    device_by_uuid = by_uuid;
    utilization_rates = rates;
  }
};

const nvml_library& nvml() {
  static const nvml_library lib;
  return lib;
}

}  // namespace

std::string nvml_uuid(const char (&uuid)[16]) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    const auto b = static_cast<unsigned char>(uuid[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

double nvml_utilization(const char (&uuid)[16]) {
  const nvml_library& lib = nvml();
  if (!lib.device_by_uuid) return -1;
  nvml_device dev = nullptr;
  if (lib.device_by_uuid(nvml_uuid(uuid).c_str(), &dev) != k_nvml_success) return -1;
  nvml_utilization_rates rates{};
  if (lib.utilization_rates(dev, &rates) != k_nvml_success || rates.gpu > 100) return -1;
  return rates.gpu / 100.0;
}

}  // namespace hearth::cuda
