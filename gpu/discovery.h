// Which GPUs this machine has, for the node to advertise. Each backend that is built contributes
// its devices: Vulkan enumerates physical devices through the loader (any vendor, and Mesa's
// lavapipe CPU implementation); CUDA asks the NVIDIA driver (name, total and free memory,
// compute capability). An NVIDIA card thus appears twice, once per backend.
// Discovery never fails: a missing loader or driver means no devices from that backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::gpu {

// One memory heap of a device, as the driver describes it.
struct memory_heap {
  uint64_t size = 0;  // bytes
  bool device_local = false;
};

struct device_info {
  std::string backend;  // "vulkan", "cuda"
  std::string name;
  std::string vendor;         // "NVIDIA", "AMD", "Intel", "Mesa", ... or the PCI id "0x1234"
  std::string type;           // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_total = 0;  // bytes of device-local memory (the sum of those heaps)
  uint64_t memory_free = 0;   // bytes; equal to memory_total where the driver does not say
  std::vector<memory_heap> heaps;
  std::string compute_capability;  // CUDA devices: "8.6", "9.0"; "" otherwise
};

// A Vulkan vendor id as a name ("NVIDIA" for 0x10de); unknown ids as "0x" and hex digits.
std::string vendor_name(uint32_t vendor_id);

// "discrete", "integrated", "virtual", "cpu" or "other" for a VkPhysicalDeviceType value.
const char* vulkan_device_type_name(uint32_t vk_physical_device_type);

std::vector<device_info> discover();

}  // namespace hearth::gpu
