// The Vulkan backend as a loadable module (libhearth-vulkan.so, backends/module.h): its devices
// from the one Vulkan instance of the process (device.cpp), and backends on them.
#include <vulkan/vulkan.h>

#include <cstdio>
#include <stdexcept>

#include "backends/module.h"
#include "backends/vulkan/backend-vulkan.h"
#include "backends/vulkan/device.h"

namespace hearth::vk {
namespace {

// PCI vendor ids, and the ids Khronos assigned to vendors without one (VkVendorId).
std::string vendor_name(uint32_t vendor_id) {
  switch (vendor_id) {
    case 0x10de:
      return "NVIDIA";
    case 0x1002:
    case 0x1022:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x13b5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x1010:
      return "Imagination";
    case 0x106b:
      return "Apple";
    case 0x14e4:
      return "Broadcom";
    case 0x10005:
      return "Mesa";
    case 0x10002:
      return "VeriSilicon";
    case 0x10004:
      return "Codeplay";
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%04x", vendor_id);
      return buf;
    }
  }
}

gpu::device_type type_of(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return gpu::device_type::discrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return gpu::device_type::integrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return gpu::device_type::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return gpu::device_type::cpu;
    default:
      return gpu::device_type::other;
  }
}

std::vector<gpu::device> devices(std::string& why_none) {
  std::vector<gpu::device> out;
  try {
    if (instance() == VK_NULL_HANDLE) {
      why_none = "no Vulkan driver (vkCreateInstance failed)";
      return out;
    }
    const std::vector<VkPhysicalDevice> all = physical_devices();
    for (size_t i = 0; i < all.size(); ++i) {
      VkPhysicalDeviceProperties p{};
      vkGetPhysicalDeviceProperties(all[i], &p);
      VkPhysicalDeviceMemoryProperties mem{};
      vkGetPhysicalDeviceMemoryProperties(all[i], &mem);
      gpu::device d;
      d.name = p.deviceName;
      d.backend = gpu::backend_kind::vulkan;
      d.index = int(i);
      d.type = type_of(p.deviceType);
      d.vendor = vendor_name(p.vendorID);
      for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
        const bool local = mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
        d.heaps.push_back({mem.memoryHeaps[h].size, local});
        if (local) d.memory_total += mem.memoryHeaps[h].size;
      }
      // Free memory where the driver has VK_EXT_memory_budget, else 0 (unknown); Vulkan says
      // nothing of utilisation, which stays unknown.
      d.memory_free = memory_free(all[i]);
      d.subgroup_arithmetic = p.apiVersion >= VK_API_VERSION_1_1 && has_subgroup_arithmetic(all[i]);
      if (p.apiVersion >= VK_API_VERSION_1_1) d.uuid = device_uuid(all[i]);
      d.detail = std::string("subgroup arithmetic ") + (d.subgroup_arithmetic ? "yes" : "no");
      out.push_back(std::move(d));
    }
    if (out.empty()) why_none = "no Vulkan device";
  } catch (const std::exception& e) {
    out.clear();
    why_none = e.what();
  }
  return out;
}

std::unique_ptr<backend> make(int index) {
  vulkan_options o;
  o.device = index;
  return make_vulkan_backend(o);
}

}  // namespace
}  // namespace hearth::vk

extern "C" __attribute__((visibility("default"))) const hearth::gpu::backend_module*
hearth_backend_module_init() {
  static const hearth::gpu::backend_module m = [] {
    hearth::gpu::backend_module d;
    d.kind = hearth::gpu::backend_kind::vulkan;
    d.title = "Vulkan";
    d.devices = hearth::vk::devices;
    d.make = hearth::vk::make;
    return d;
  }();
  return &m;
}
