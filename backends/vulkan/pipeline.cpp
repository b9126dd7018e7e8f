// Compute pipelines from the embedded SPIR-V (one per shader variant, created on first use),
// and recording a dispatch with its descriptor set and push constants.
#include <cstring>
#include <stdexcept>

#include "backends/vulkan/device.h"
#include "backends/vulkan/spirv.h"

namespace hearth::vk {

VkPipeline device::pipeline(const char* variant) {
  auto it = pipelines_.find(variant);
  if (it != pipelines_.end()) return it->second;
  const spirv_module* m = find_spirv(variant);
  if (!m) throw std::runtime_error(std::string("vulkan: no shader variant ") + variant);
  VkShaderModuleCreateInfo smci{};
  smci.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  smci.codeSize = m->bytes;
  smci.pCode = m->code;
  VkShaderModule module = VK_NULL_HANDLE;
  HEARTH_VK_CHECK(vkCreateShaderModule(device_, &smci, nullptr, &module));
  VkComputePipelineCreateInfo cpci{};
  cpci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpci.stage.module = module;
  cpci.stage.pName = "main";
  cpci.layout = pipeline_layout_;
  VkPipeline p = VK_NULL_HANDLE;
  const VkResult r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpci, nullptr, &p);
  vkDestroyShaderModule(device_, module, nullptr);
  HEARTH_VK_CHECK(r);
  pipelines_.emplace(variant, p);
  return p;
}

void device::dispatch(const char* variant, const std::vector<const buffer*>& bindings,
                      const void* push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                      uint32_t gz) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  if (push_bytes > k_push_bytes || bindings.size() > k_bindings)
    throw std::logic_error("vulkan: dispatch of " + std::string(variant) + " exceeds the layout");
  VkPipeline p = pipeline(variant);
  if (sets_used_ == k_sets_per_pool) submit_and_wait();  // resets the pool
  VkDescriptorSetAllocateInfo dsai{};
  dsai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  dsai.descriptorPool = descriptor_pool_;
  dsai.descriptorSetCount = 1;
  dsai.pSetLayouts = &set_layout_;
  VkDescriptorSet set = VK_NULL_HANDLE;
  HEARTH_VK_CHECK(vkAllocateDescriptorSets(device_, &dsai, &set));
  ++sets_used_;
  VkDescriptorBufferInfo infos[k_bindings]{};
  VkWriteDescriptorSet writes[k_bindings]{};
  for (uint32_t i = 0; i < k_bindings; ++i) {
    const buffer* b = i < bindings.size() && bindings[i] ? bindings[i] : dummy_;
    infos[i] = {b->handle, 0, VK_WHOLE_SIZE};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(device_, k_bindings, writes, 0, nullptr);
  VkCommandBuffer cb = recording();
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1, &set, 0,
                          nullptr);
  if (push_bytes > 0)
    vkCmdPushConstants(cb, pipeline_layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cb, gx, gy, gz);
}

}  // namespace hearth::vk
