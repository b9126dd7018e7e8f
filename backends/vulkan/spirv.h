// The compute shaders as SPIR-V, embedded at build time (backends/vulkan/embed-spirv.cmake writes
// the definition from the variants backends/vulkan/CMakeLists.txt compiles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace hearth::vk {

struct spirv_module {
  const char* name;  // shader variant: "mul_mat_vec_q8_0_sg"
  const uint32_t* code;
  size_t bytes;
};

const std::vector<spirv_module>& spirv_modules();

// The variant called `name`, or nullptr where the build compiled none.
inline const spirv_module* find_spirv(const char* name) {
  for (const spirv_module& s : spirv_modules())
    if (std::strcmp(s.name, name) == 0) return &s;
  return nullptr;
}

}  // namespace hearth::vk
