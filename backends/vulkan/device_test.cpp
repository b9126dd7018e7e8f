// The free memory read from VK_EXT_memory_budget, over made-up heaps: lavapipe lacks the
// extension, so the sum is checked here rather than on a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/vulkan/device.h"

namespace hearth::vk {
namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

struct heap {
  uint64_t size;
  bool device_local;
  uint64_t budget;
  uint64_t usage;
};

uint64_t free_of(const std::vector<heap>& heaps) {
  VkPhysicalDeviceMemoryProperties mem{};
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
  mem.memoryHeapCount = uint32_t(heaps.size());
  for (size_t i = 0; i < heaps.size(); ++i) {
    mem.memoryHeaps[i].size = heaps[i].size;
    mem.memoryHeaps[i].flags = heaps[i].device_local ? VK_MEMORY_HEAP_DEVICE_LOCAL_BIT : 0;
    budget.heapBudget[i] = heaps[i].budget;
    budget.heapUsage[i] = heaps[i].usage;
  }
  return memory_budget_free(mem, budget);
}

TEST(VulkanMemoryBudget, DiscreteGpuCountsItsVramNotHostMemory) {
  // A 24 GiB card with 2 GiB in use, and the 64 GiB host heap it can also reach.
  EXPECT_EQ(free_of({{24 * GiB, true, 23 * GiB, 2 * GiB}, {64 * GiB, false, 48 * GiB, 0}}),
            21 * GiB);
}

TEST(VulkanMemoryBudget, SumsEveryDeviceLocalHeap) {
  // AMD's small host-visible VRAM window (BAR) is a device-local heap of its own.
  EXPECT_EQ(free_of({{16 * GiB, true, 15 * GiB, 5 * GiB},
                     {32 * GiB, false, 24 * GiB, 1 * GiB},
                     {256 << 20, true, 256 << 20, 64 << 20}}),
            10 * GiB + (192 << 20));
}

TEST(VulkanMemoryBudget, UsageOverBudgetCountsAsNothingFree) {
  EXPECT_EQ(free_of({{8 * GiB, true, 6 * GiB, 7 * GiB}, {8 * GiB, true, 4 * GiB, 1 * GiB}}),
            3 * GiB);
}

TEST(VulkanMemoryBudget, NoDeviceLocalHeapIsZero) {
  EXPECT_EQ(free_of({{16 * GiB, false, 8 * GiB, 0}}), 0u);
  EXPECT_EQ(free_of({}), 0u);
}

}  // namespace
}  // namespace hearth::vk
