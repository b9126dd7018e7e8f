// CUDA devices as the node and `hearth devices` describe them, and the device memory the
// backend takes: every allocation goes through device_alloc so that running out of memory is
// one clear error naming what did not fit, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hearth::cuda {

struct device_desc {
  int index = 0;
  std::string name;
  uint64_t memory_total = 0;  // bytes
  uint64_t memory_free = 0;   // bytes, when discovered
  int cc_major = 0;           // compute capability, e.g. 9.0 for Hopper
  int cc_minor = 0;
  int sm_count = 0;
  // Peak DRAM bandwidth from the memory clock and bus width (GB/s); 0 when the driver does not
  // report them. What bench/ compares measured bandwidth against.
  double peak_bandwidth_gbs = 0;
};

// The CUDA devices of this machine; empty when there is no driver or no device. Never throws.
std::vector<device_desc> devices();

// Why devices() is empty ("no NVIDIA driver (libcuda) found", "no CUDA device", ...); "" when
// it is not.
std::string unavailable_reason();

// "9.0" for a compute capability.
std::string compute_capability(const device_desc& d);

// cudaMalloc of `bytes` on the current device; throws cuda_error "out of device memory: <what>
// needs X but only Y of Z are free" when it does not fit.
void* device_alloc(size_t bytes, const char* what);
void device_free(void* p);

}  // namespace hearth::cuda
