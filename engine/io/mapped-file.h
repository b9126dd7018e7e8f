// A whole file mapped read-only into memory: how model files (GGUF, safetensors) are read, so
// weights are paged in on demand and shared with the page cache instead of copied.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/result.h"

namespace hearth {

class mapped_file {
 public:
  // Errors name the path and the system's reason; a directory or device is refused.
  static result<std::shared_ptr<const mapped_file>> open(const std::string& path);

  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file();

  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(addr_), size_}; }

 private:
  mapped_file() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace hearth
