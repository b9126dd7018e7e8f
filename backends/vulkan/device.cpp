#include "backends/vulkan/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "backends/device.h"

namespace hearth::vk {

void fail(VkResult r, const char* stmt, const char* file, int line) {
  throw std::runtime_error("vulkan: " + std::string(stmt) + " failed with VkResult " +
                           std::to_string(int(r)) + " at " + file + ":" + std::to_string(line));
}

VkInstance instance() {
  static std::once_flag once;
  static VkInstance inst = VK_NULL_HANDLE;
  std::call_once(once, [] {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "hearth";
    app.apiVersion = VK_API_VERSION_1_1;
    VkInstanceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ci.pApplicationInfo = &app;
    if (vkCreateInstance(&ci, nullptr, &inst) != VK_SUCCESS) inst = VK_NULL_HANDLE;
  });
  return inst;
}

std::vector<VkPhysicalDevice> physical_devices() {
  VkInstance inst = instance();
  if (inst == VK_NULL_HANDLE) return {};
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(inst, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> out(n);
  if (n > 0 && vkEnumeratePhysicalDevices(inst, &n, out.data()) < 0) return {};
  out.resize(n);
  return out;
}

namespace {
// One of the structures vkGetPhysicalDeviceProperties2 fills through its pNext chain (`type`
// its sType), for `d`. Vulkan 1.1.
template <class T>
T properties2(VkPhysicalDevice d, VkStructureType type) {
  T out{};
  out.sType = type;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &out;
  vkGetPhysicalDeviceProperties2(d, &p2);
  out.pNext = nullptr;
  return out;
}
}  // namespace

bool has_subgroup_arithmetic(VkPhysicalDevice d) {
  const auto sg = properties2<VkPhysicalDeviceSubgroupProperties>(
      d, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  return (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
         (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
         (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
}

std::string device_uuid(VkPhysicalDevice d) {
  const auto id =
      properties2<VkPhysicalDeviceIDProperties>(d, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
  return gpu::uuid_hex(id.deviceUUID);
}

uint64_t memory_budget_free(const VkPhysicalDeviceMemoryProperties& mem,
                            const VkPhysicalDeviceMemoryBudgetPropertiesEXT& budget) {
  uint64_t free_b = 0;
  for (uint32_t h = 0; h < mem.memoryHeapCount && h < VK_MAX_MEMORY_HEAPS; ++h) {
    if (!(mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    if (budget.heapBudget[h] > budget.heapUsage[h])
      free_b += budget.heapBudget[h] - budget.heapUsage[h];
  }
  return free_b;
}

uint64_t memory_free(VkPhysicalDevice d) {
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(d, &p);
  // vkGetPhysicalDeviceMemoryProperties2 is core in 1.1, for the device as for the instance.
  if (p.apiVersion < VK_API_VERSION_1_1) return 0;
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr) != VK_SUCCESS) return 0;
  std::vector<VkExtensionProperties> exts(n);
  if (n > 0 && vkEnumerateDeviceExtensionProperties(d, nullptr, &n, exts.data()) < 0) return 0;
  exts.resize(n);
  bool supported = false;
  for (const auto& e : exts)
    supported = supported || std::strcmp(e.extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0;
  if (!supported) return 0;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  VkPhysicalDeviceMemoryProperties2 mem2{};
  mem2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  mem2.pNext = &budget;
  vkGetPhysicalDeviceMemoryProperties2(d, &mem2);
  return memory_budget_free(mem2.memoryProperties, budget);
}

namespace {

// The first queue family with compute, or -1.
int compute_family(VkPhysicalDevice d) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(d, &n, families.data());
  for (uint32_t i = 0; i < n; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return int(i);
  return -1;
}

}  // namespace

device::device(int index) {
  const std::vector<VkPhysicalDevice> all = physical_devices();
  if (all.empty())
    throw std::runtime_error("vulkan: no Vulkan device (no loader, driver or device)");
  if (index < 0 || index >= int(all.size()))
    throw std::runtime_error("vulkan: device " + std::to_string(index) + " does not exist (" +
                             std::to_string(all.size()) + " found)");
  physical_ = all[size_t(index)];
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(physical_, &props);
  name_ = props.deviceName;
  if (props.apiVersion < VK_API_VERSION_1_1)
    throw std::runtime_error("vulkan: device " + name_ + " supports only Vulkan " +
                             std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                             std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) +
                             "; 1.1 is required");
  const int family = compute_family(physical_);
  if (family < 0) throw std::runtime_error("vulkan: device " + name_ + " has no compute queue");
  queue_family_ = uint32_t(family);
  // HEARTH_VULKAN_NO_SUBGROUP=1 selects the shared-memory reductions (tested on devices that
  // have subgroup arithmetic too).
  const char* no_subgroup = std::getenv("HEARTH_VULKAN_NO_SUBGROUP");
  subgroup_arithmetic_ =
      has_subgroup_arithmetic(physical_) && !(no_subgroup && std::string(no_subgroup) == "1");
  const auto sg = properties2<VkPhysicalDeviceSubgroupProperties>(
      physical_, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
  subgroup_size_ = sg.subgroupSize;
  subgroup_ballot_ =
      subgroup_arithmetic_ && (sg.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
  cpu_device_ = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  unified_memory_ = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                    props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  max_buffer_bytes_ = props.limits.maxStorageBufferRange;
  weight_part_bytes_ = max_buffer_bytes_;
  if (const char* cap = std::getenv("HEARTH_VULKAN_WEIGHT_PART_BYTES")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(cap, &end, 10);
    if (end == cap || *end != '\0' || v < 16)
      throw std::runtime_error(std::string("vulkan: HEARTH_VULKAN_WEIGHT_PART_BYTES is '") + cap +
                               "', expected a number of bytes of at least 16");
    weight_part_bytes_ = std::min<VkDeviceSize>(weight_part_bytes_, v);
  }
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  HEARTH_VK_CHECK(vkCreateDevice(physical_, &dci, nullptr, &device_));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_family_;
  HEARTH_VK_CHECK(vkCreateCommandPool(device_, &pci, nullptr, &command_pool_));
  VkCommandBufferAllocateInfo cai{};
  cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cai.commandPool = command_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  HEARTH_VK_CHECK(vkAllocateCommandBuffers(device_, &cai, &commands_));
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  HEARTH_VK_CHECK(vkCreateFence(device_, &fci, nullptr, &fence_));

  // One layout for every pipeline: k_bindings storage buffers and k_push_bytes of constants.
  VkDescriptorSetLayoutBinding bindings[k_bindings]{};
  for (uint32_t i = 0; i < k_bindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo lci{};
  lci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  lci.bindingCount = k_bindings;
  lci.pBindings = bindings;
  HEARTH_VK_CHECK(vkCreateDescriptorSetLayout(device_, &lci, nullptr, &set_layout_));
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k_push_bytes};
  VkPipelineLayoutCreateInfo plci{};
  plci.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &set_layout_;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &range;
  HEARTH_VK_CHECK(vkCreatePipelineLayout(device_, &plci, nullptr, &pipeline_layout_));
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, k_sets_per_pool * k_bindings};
  VkDescriptorPoolCreateInfo dpci{};
  dpci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  dpci.maxSets = k_sets_per_pool;
  dpci.poolSizeCount = 1;
  dpci.pPoolSizes = &size;
  HEARTH_VK_CHECK(vkCreateDescriptorPool(device_, &dpci, nullptr, &descriptor_pool_));

  dummy_ = alloc(256, "dummy");
}

device::~device() {
  if (device_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(device_);
  if (staging_) free(staging_);
  if (upload_ring_) free(upload_ring_);
  if (dummy_) free(dummy_);
  for (auto& [name, p] : pipelines_) vkDestroyPipeline(device_, p, nullptr);
  vkDestroyDescriptorPool(device_, descriptor_pool_, nullptr);
  vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
  vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
  vkDestroyFence(device_, fence_, nullptr);
  vkDestroyCommandPool(device_, command_pool_, nullptr);
  vkDestroyDevice(device_, nullptr);
}

VkCommandBuffer device::recording() {
  if (!recording_) {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    HEARTH_VK_CHECK(vkBeginCommandBuffer(commands_, &bi));
    recording_ = true;
    recorded_any_ = false;
  } else if (recorded_any_) {
    // Ops run in order: each sees every write of the ops before it.
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(commands_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  recorded_any_ = true;
  return commands_;
}

void device::submit_and_wait() {
  if (!recording_) return;
  HEARTH_VK_CHECK(vkEndCommandBuffer(commands_));
  recording_ = false;
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &commands_;
  HEARTH_VK_CHECK(vkQueueSubmit(queue_, 1, &si, fence_));
  HEARTH_VK_CHECK(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
  HEARTH_VK_CHECK(vkResetFences(device_, 1, &fence_));
  HEARTH_VK_CHECK(vkResetCommandBuffer(commands_, 0));
  HEARTH_VK_CHECK(vkResetDescriptorPool(device_, descriptor_pool_, 0));
  sets_used_ = 0;
  upload_used_ = 0;
}

}  // namespace hearth::vk
