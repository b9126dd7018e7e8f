#include "gpu/discovery.h"

#include <cstdio>
#include <mutex>

#ifdef HEARTH_HAVE_VULKAN
#include <vulkan/vulkan.h>
#endif
#ifdef HEARTH_HAVE_CUDA
#include "gpu/cuda/device.h"
#endif

namespace hearth::gpu {
namespace {

#ifdef HEARTH_HAVE_VULKAN
void discover_vulkan(std::vector<device_info>& out) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "hearth";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  // One instance for the life of the process, never destroyed: destroying it makes the loader
  // unload the drivers, and Mesa's drivers leave an allocation behind when unloaded that leak
  // checkers then report against whoever called discover(). The backend reuses it (issue 5).
  static VkInstance instance = VK_NULL_HANDLE;
  if (instance == VK_NULL_HANDLE && vkCreateInstance(&ci, nullptr, &instance) != VK_SUCCESS) {
    instance = VK_NULL_HANDLE;
    return;
  }
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  if (n > 0) vkEnumeratePhysicalDevices(instance, &n, devices.data());
  for (VkPhysicalDevice d : devices) {
    VkPhysicalDeviceProperties props{};
    vkGetPhysicalDeviceProperties(d, &props);
    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(d, &mem);
    device_info info;
    info.backend = "vulkan";
    info.name = props.deviceName;
    info.vendor = vendor_name(props.vendorID);
    info.type = vulkan_device_type_name(uint32_t(props.deviceType));
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
      const bool local = mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
      info.heaps.push_back({mem.memoryHeaps[h].size, local});
      if (local) info.memory_total += mem.memoryHeaps[h].size;
    }
    info.memory_free = info.memory_total;  // VK_EXT_memory_budget is read by the backend (issue 5)
    out.push_back(std::move(info));
  }
}
#endif

#ifdef HEARTH_HAVE_CUDA
void discover_cuda(std::vector<device_info>& out) {
  for (const cuda::device_desc& d : cuda::devices()) {
    device_info info;
    info.backend = "cuda";
    info.name = d.name;
    info.vendor = "NVIDIA";
    info.type = "discrete";
    info.memory_total = d.memory_total;
    info.memory_free = d.memory_free;  // cudaMemGetInfo: what models can still take
    info.heaps.push_back({d.memory_total, true});
    info.compute_capability = cuda::compute_capability(d);
    out.push_back(std::move(info));
  }
}
#endif

}  // namespace

std::string vendor_name(uint32_t vendor_id) {
  // PCI vendor ids, and the ids Khronos assigned to vendors without one (VkVendorId).
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

const char* vulkan_device_type_name(uint32_t t) {
  // VkPhysicalDeviceType values (the header is not needed to name them).
  switch (t) {
    case 1:
      return "integrated";
    case 2:
      return "discrete";
    case 3:
      return "virtual";
    case 4:
      return "cpu";
    default:
      return "other";
  }
}

std::vector<device_info> discover() {
  std::vector<device_info> out;
#ifdef HEARTH_HAVE_CUDA
  discover_cuda(out);
#endif
#ifdef HEARTH_HAVE_VULKAN
  discover_vulkan(out);
#endif
  return out;
}

}  // namespace hearth::gpu
