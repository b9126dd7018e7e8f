// GPU utilisation from NVML (libnvidia-ml.so.1, which comes with the NVIDIA driver), opened with
// dlopen on first use: hearth-cuda links nothing of it, so a machine without it (a container
// given libcuda alone) loses the utilisation and nothing else.
#pragma once

#include <string>

namespace hearth::cuda {

// Share of NVML's last sample period (1/6 s to 1 s, by product) in which the GPU whose UUID is
// `uuid` (cudaDeviceProp::uuid) ran a kernel, 0 to 1; -1 where NVML is missing, fails to start
// or does not know the device (a MIG instance). Devices are matched by UUID, never by index:
// CUDA_VISIBLE_DEVICES renumbers CUDA's devices and not NVML's. Thread-safe; NVML starts on the
// first call (tens of milliseconds) and stays for the process.
double nvml_utilization(const char (&uuid)[16]);

// `uuid` as NVML names the GPU (and nvidia-smi -L shows it): "GPU-" and 32 hex digits in the
// groups 8-4-4-4-12.
std::string nvml_uuid(const char (&uuid)[16]);

}  // namespace hearth::cuda
