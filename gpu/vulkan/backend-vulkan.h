// The Vulkan backend (issue 5): every op of engine/backend.h as compute shaders, on any Vulkan
// 1.1 device (Mesa's lavapipe in CI). Ops are recorded into one command buffer with barriers
// between them; download() and synchronize() submit and wait.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace hearth {

struct vulkan_options {
  int device = -1;  // index into the enumeration order of vulkan_devices(); -1: the best
};

struct vulkan_device_desc {
  int index;
  std::string name, vendor, type;
  uint64_t device_local_bytes;
  bool subgroup_arithmetic;
};

std::vector<vulkan_device_desc> vulkan_devices();  // never throws; empty without loader/driver

// A backend on the chosen device. Throws std::runtime_error with ONE informative line when no
// device is usable or a required feature is missing (the caller then falls back to the CPU).
std::unique_ptr<backend> make_vulkan_backend(const vulkan_options& o);

}  // namespace hearth
