// One Vulkan device as the backend uses it: the process-wide instance, device selection, one
// compute queue, buffers (buffer.cpp), compute pipelines from the embedded SPIR-V (pipeline.cpp)
// and one command buffer into which ops (and small uploads) are recorded until a download or
// synchronize submits it.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hearth::vk {

// Throws std::runtime_error naming the failed statement, its result, file and line.
[[noreturn]] void fail(VkResult r, const char* stmt, const char* file, int line);

#define HEARTH_VK_CHECK(stmt)                                          \
  do {                                                                 \
    const VkResult hearth_vk_result = (stmt);                          \
    if (hearth_vk_result != VK_SUCCESS)                                \
      ::hearth::vk::fail(hearth_vk_result, #stmt, __FILE__, __LINE__); \
  } while (0)

// The process-wide instance, the only one (the module's device list and its backends share it),
// or VK_NULL_HANDLE without a driver. Never destroyed: destroying it makes the loader unload the
// drivers, and Mesa's drivers leave an allocation behind when unloaded that leak checkers then
// report; for the same reason the module is never dlclosed.
VkInstance instance();
// Physical devices in enumeration order (the index vulkan_options::device refers to).
std::vector<VkPhysicalDevice> physical_devices();
// Whether compute shaders on `d` have subgroup arithmetic (subgroupAdd, subgroupMax).
bool has_subgroup_arithmetic(VkPhysicalDevice d);
// Bytes of device-local memory this process may still allocate on `d`, from VK_EXT_memory_budget;
// 0 where the device lacks the extension or Vulkan 1.1 (unknown: gpu::device::memory_free).
// Cheap (no device is created), so the node can re-read it on every devices() call.
uint64_t memory_free(VkPhysicalDevice d);
// The device's UUID (VkPhysicalDeviceIDProperties; Vulkan 1.1) as gpu::uuid_hex writes it: the
// same as CUDA's for the same NVIDIA card.
std::string device_uuid(VkPhysicalDevice d);
// The sum over the device-local heaps of `mem` of budget minus usage, each clamped at 0: usage may
// pass the budget when another process takes memory after we allocated ours.
uint64_t memory_budget_free(const VkPhysicalDeviceMemoryProperties& mem,
                            const VkPhysicalDeviceMemoryBudgetPropertiesEXT& budget);

// A buffer and its memory. `mapped` is non-null when the memory is host-visible and coherent.
struct buffer {
  VkBuffer handle = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceSize size = 0;
  void* mapped = nullptr;
  // A weight's rows [first_row, first_row + n_rows) (n_rows 0: not a weight, a buffer from
  // alloc()). A weight larger than device::weight_part_bytes is held in row parts, a buffer each,
  // `next_part` holding the rows after this one's (null: the last part, or the only one).
  int64_t first_row = 0;
  int64_t n_rows = 0;
  buffer* next_part = nullptr;
};

class device {
 public:
  // The device at `index` of physical_devices() (the registry chooses which: backends/registry.h).
  // Throws std::runtime_error in one line.
  explicit device(int index);
  ~device();
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const std::string& name() const { return name_; }
  bool subgroup_arithmetic() const { return subgroup_arithmetic_; }
  uint32_t subgroup_size() const { return subgroup_size_; }
  // subgroupBroadcast (where subgroup_arithmetic() too: HEARTH_VULKAN_NO_SUBGROUP turns it off).
  bool subgroup_ballot() const { return subgroup_ballot_; }
  // A CPU device (lavapipe): one SIMD vector per subgroup.
  bool cpu_device() const { return cpu_device_; }
  // Whether the shaders' lane layouts run here (mul_mat.comp ROW_PER_LANE, attention.comp
  // LANES): CPU devices such as lavapipe, whose subgroups are SIMD vectors of 8 to 64 lanes
  // (wider ones run partly filled; lavapipe's are 8 lanes on x86), which broadcast a load over
  // them (HEARTH_VULKAN_NO_SUBGROUP turns it off, so the GPU layouts stay tested on lavapipe).
  // They sum each token's terms in one order at every token count (backend::batch_invariant),
  // and they are faster there (mul-mat.cpp and attention.cpp say by how much).
  bool lane_layouts() const {
    return subgroup_ballot_ && cpu_device_ && subgroup_size_ >= 8 && subgroup_size_ <= 64;
  }
  // The most bytes one buffer may have: maxStorageBufferRange (128 MiB on lavapipe and on some
  // ARM GPUs).
  VkDeviceSize max_buffer_bytes() const { return max_buffer_bytes_; }
  // The most bytes of a weight one buffer holds (larger ones are held in row parts):
  // max_buffer_bytes(), or less where HEARTH_VULKAN_WEIGHT_PART_BYTES says (the tests' way to
  // split weights on any device).
  VkDeviceSize weight_part_bytes() const { return weight_part_bytes_; }

  // --- buffer.cpp: device-local buffers for tensors (host-visible where the device's local
  // memory is, as on lavapipe and integrated GPUs), and copies through a staging buffer.
  buffer* alloc(VkDeviceSize bytes, const char* what);
  void free(buffer* b);
  // Host -> buffer. Waits only for large uploads behind recorded work; small ones are recorded
  // as copies (in order with the ops), a host-visible dst with nothing recorded is written at once.
  void upload(buffer* dst, const void* src, size_t bytes);
  void download(buffer* src, void* dst, size_t bytes);

  // --- pipeline.cpp: records a dispatch of shader variant `variant` with `bindings` as
  // storage buffers 0.. (null: a dummy buffer) and `push` as push constants.
  void dispatch(const char* variant, const std::vector<const buffer*>& bindings, const void* push,
                uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz);

  // Submits everything recorded and waits for it; nothing happens when nothing was recorded.
  void submit_and_wait();

 private:
  VkCommandBuffer recording();  // the command buffer, begun; a barrier after any earlier work
  uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid);
  buffer* create_buffer(VkDeviceSize bytes, uint32_t type_index, const char* what);
  VkPipeline pipeline(const char* variant);

  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  std::string name_;
  bool subgroup_arithmetic_ = false;
  uint32_t subgroup_size_ = 1;
  bool subgroup_ballot_ = false;
  bool cpu_device_ = false;
  bool unified_memory_ = false;  // integrated or CPU: prefer host-visible device-local memory
  VkDeviceSize max_buffer_bytes_ = 0;
  VkDeviceSize weight_part_bytes_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};

  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool recording_ = false;
  bool recorded_any_ = false;

  static constexpr uint32_t k_bindings = 8;
  static constexpr uint32_t k_push_bytes = 128;
  static constexpr uint32_t k_sets_per_pool = 1024;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  uint32_t sets_used_ = 0;
  std::map<std::string, VkPipeline> pipelines_;

  static constexpr VkDeviceSize k_upload_ring_bytes = 4u << 20;
  buffer* upload_ring_ = nullptr;  // host-visible: upload()'s recorded copies, reset by a wait
  VkDeviceSize upload_used_ = 0;
  buffer* staging_buffer();    // staging_, made on first use
  buffer* staging_ = nullptr;  // host-visible, for devices whose local memory is not
  buffer* dummy_ = nullptr;    // bound where an op has no tensor (absent bias)
};

}  // namespace hearth::vk
