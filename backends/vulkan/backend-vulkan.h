// The Vulkan backend (issue 5): every op of engine/backend.h as compute shaders, on any Vulkan
// 1.1 device (Mesa's lavapipe in CI). Ops are recorded into one command buffer with barriers
// between them; download() and synchronize() submit and wait.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace hearth {

struct vulkan_options {
  // Index into the physical devices in enumeration order (the registry's device index; the
  // registry picks the best: backends/registry.h).
  int device = 0;
};

// A backend on the chosen device. Throws std::runtime_error with ONE informative line when no
// device is usable or a required feature is missing (the caller then falls back to the CPU).
std::unique_ptr<backend> make_vulkan_backend(const vulkan_options& o);

}  // namespace hearth
