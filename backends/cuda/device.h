// CUDA devices as the registry describes them, and the device memory the
// backend takes: every allocation goes through device_alloc so that running out of memory is
// one clear error naming what did not fit, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/device.h"

namespace hearth::cuda {

// The CUDA devices of this machine in the registry's description (backends/device.h): name, total
// and free memory, utilisation (where NVML says: nvml.h), compute capability, peak bandwidth in
// the detail line; empty when there is no driver or no device. Never throws.
std::vector<gpu::device> devices();

// Why devices() is empty ("no NVIDIA driver (libcuda) found", "no CUDA device", ...); "" when
// it is not.
std::string unavailable_reason();

// cudaMalloc of `bytes` on the current device; throws cuda_error "out of device memory: <what>
// needs X but only Y of Z are free" when it does not fit.
void* device_alloc(size_t bytes, const char* what);
void device_free(void* p);

}  // namespace hearth::cuda
