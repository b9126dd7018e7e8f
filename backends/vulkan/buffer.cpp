// Buffers: device-local memory for every tensor (host-visible device-local memory where the
// device has it and is integrated or a CPU, so uploads and downloads are plain copies), and a
// host-visible staging buffer for the other devices; small uploads behind recorded work go through
// an upload ring as recorded copies, without a wait.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "backends/vulkan/device.h"

namespace hearth::vk {

uint32_t device::memory_type(uint32_t allowed, VkMemoryPropertyFlags want,
                             VkMemoryPropertyFlags avoid) {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((allowed & (1u << i)) && (f & want) == want && (f & avoid) == 0) return i;
  }
  return UINT32_MAX;
}

buffer* device::create_buffer(VkDeviceSize bytes, uint32_t type_index, const char* what) {
  auto* b = new buffer;
  b->size = bytes;
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  try {
    HEARTH_VK_CHECK(vkCreateBuffer(device_, &bci, nullptr, &b->handle));
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device_, b->handle, &req);
    if (type_index == UINT32_MAX || !(req.memoryTypeBits & (1u << type_index))) {
      throw std::runtime_error(std::string("vulkan: no memory type for ") + what);
    }
    VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type_index;
    const VkResult r = vkAllocateMemory(device_, &mai, nullptr, &b->memory);
    if (r != VK_SUCCESS) {
      throw std::runtime_error(std::string("vulkan: allocating ") + std::to_string(bytes) +
                               " bytes for " + what + " on " + name_ + " failed (VkResult " +
                               std::to_string(int(r)) + ")");
    }
    HEARTH_VK_CHECK(vkBindBufferMemory(device_, b->handle, b->memory, 0));
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((memory_.memoryTypes[type_index].propertyFlags & host) == host) {
      HEARTH_VK_CHECK(vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped));
    }
  } catch (...) {
    free(b);
    throw;
  }
  return b;
}

buffer* device::alloc(VkDeviceSize bytes, const char* what) {
  bytes = std::max<VkDeviceSize>(16, (bytes + 15) / 16 * 16);  // shaders read whole uints
  if (bytes > max_buffer_bytes_) {
    throw std::runtime_error("vulkan: " + std::string(what) + " needs " + std::to_string(bytes) +
                             " bytes, more than the " + std::to_string(max_buffer_bytes_) +
                             " one storage buffer may have on " + name_);
  }
  // Which types the buffer may use: ask with a throwaway buffer of this usage.
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  VkBuffer probe = VK_NULL_HANDLE;
  HEARTH_VK_CHECK(vkCreateBuffer(device_, &bci, nullptr, &probe));
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, probe, &req);
  vkDestroyBuffer(device_, probe, nullptr);
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  if (unified_memory_) type = memory_type(req.memoryTypeBits, local | host, 0);
  if (type == UINT32_MAX) type = memory_type(req.memoryTypeBits, local, 0);
  if (type == UINT32_MAX) type = memory_type(req.memoryTypeBits, 0, 0);
  return create_buffer(bytes, type, what);
}

void device::free(buffer* b) {
  if (!b) return;
  if (b->mapped) vkUnmapMemory(device_, b->memory);
  if (b->handle) vkDestroyBuffer(device_, b->handle, nullptr);
  if (b->memory) vkFreeMemory(device_, b->memory, nullptr);
  delete b;
}

// The 64 MiB host-visible buffer uploads and downloads copy through, made on first use.
buffer* device::staging_buffer() {
  if (!staging_) {
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    staging_ = create_buffer(64u << 20, memory_type(~0u, host, 0), "staging");
  }
  return staging_;
}

void device::upload(buffer* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  // Nothing recorded may read dst: a host-visible dst is written in place.
  if (!recording_ && dst->mapped) {
    std::memcpy(dst->mapped, src, bytes);
    return;
  }
  // Small uploads (a step's token ids, positions, cells) are recorded as copies out of the upload
  // ring, in order with the ops around them, so a forward pass still submits once (at its
  // download). The ring is reused after the next wait.
  const VkDeviceSize at = (upload_used_ + 15) / 16 * 16;
  if (bytes <= k_upload_ring_bytes / 4 && at + bytes <= k_upload_ring_bytes) {
    if (!upload_ring_) {
      const VkMemoryPropertyFlags host =
          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      upload_ring_ = create_buffer(k_upload_ring_bytes, memory_type(~0u, host, 0), "upload ring");
    }
    std::memcpy(static_cast<uint8_t*>(upload_ring_->mapped) + at, src, bytes);
    upload_used_ = at + bytes;
    VkBufferCopy region{at, 0, bytes};
    vkCmdCopyBuffer(recording(), upload_ring_->handle, dst->handle, 1, &region);
    return;
  }
  submit_and_wait();  // work already recorded may still read dst
  if (dst->mapped) {
    std::memcpy(dst->mapped, src, bytes);
    return;
  }
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (size_t done = 0; done < bytes;) {
    buffer* staging = staging_buffer();
    const size_t n = std::min<size_t>(bytes - done, staging->size);
    std::memcpy(staging->mapped, p + done, n);
    VkBufferCopy region{0, done, n};
    vkCmdCopyBuffer(recording(), staging->handle, dst->handle, 1, &region);
    submit_and_wait();
    done += n;
  }
}

void device::download(buffer* src, void* dst, size_t bytes) {
  submit_and_wait();
  if (src->mapped) {
    std::memcpy(dst, src->mapped, bytes);
    return;
  }
  uint8_t* p = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes;) {
    buffer* staging = staging_buffer();
    const size_t n = std::min<size_t>(bytes - done, staging->size);
    VkBufferCopy region{done, 0, n};
    vkCmdCopyBuffer(recording(), src->handle, staging->handle, 1, &region);
    submit_and_wait();
    std::memcpy(p + done, staging->mapped, n);
    done += n;
  }
}

}  // namespace hearth::vk
