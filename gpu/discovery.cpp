#include "gpu/discovery.h"

#include <mutex>

#ifdef HEARTH_HAVE_VULKAN
#include <vulkan/vulkan.h>
#endif

namespace hearth::gpu {
namespace {

#ifdef HEARTH_HAVE_VULKAN
const char* vulkan_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

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
    info.type = vulkan_type_name(props.deviceType);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h) {
      if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
        info.memory_total += mem.memoryHeaps[h].size;
      }
    }
    info.memory_free = info.memory_total;  // VK_EXT_memory_budget is read by the backend (issue 5)
    out.push_back(std::move(info));
  }
}
#endif

}  // namespace

std::vector<device_info> discover() {
  std::vector<device_info> out;
#ifdef HEARTH_HAVE_VULKAN
  discover_vulkan(out);
#endif
  return out;
}

}  // namespace hearth::gpu
