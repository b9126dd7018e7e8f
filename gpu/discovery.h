// Which GPUs this machine has, for the node to advertise. Each backend that is built contributes
// its devices: Vulkan enumerates physical devices through the loader (any vendor, and Mesa's
// lavapipe CPU implementation); CUDA devices join when the CUDA backend lands (issue 7).
// Discovery never fails: a missing loader or driver means no devices from that backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::gpu {

struct device_info {
  std::string backend;  // "vulkan", "cuda"
  std::string name;
  std::string type;           // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_total = 0;  // bytes of device-local memory
  uint64_t memory_free = 0;   // bytes; equal to memory_total where the driver does not say
};

std::vector<device_info> discover();

}  // namespace hearth::gpu
