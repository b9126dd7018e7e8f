// A whole file mapped read-only into memory: how model files (GGUF, safetensors) are read, so
// weights are paged in on demand and shared with the page cache instead of copied.
//
// A mapped file that is truncated (or rewritten by `cp`, which truncates first) makes a read of a
// page past its new end raise SIGBUS, which kills the process. A program that must outlive such a
// change (the node) calls mapped_file_survive_truncation() once: a read past the end then finds
// zeros (the rest of that mapping is replaced by zero pages), mapped_file_faults() counts it, and
// the program is expected to notice the change (the node compares the file's size and time after
// each step) and to drop what it computed from it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

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
  int region_ = -1;  // its slot in the table the SIGBUS handler reads, -1: none
};

// The file at `path` mapped and read by File::parse (gguf_file, safetensors_file), the parsed file
// then keeping the mapping alive: keep(file, mapping) stores it in the file. Errors name the path.
template <class File, class Keep>
result<File> mapped_file_parse(const std::string& path, const Keep& keep) {
  auto map = mapped_file::open(path);
  if (!map) return error{map.message()};
  auto parsed = File::parse(map.value()->bytes());
  if (!parsed) return error{path + ": " + parsed.message()};
  keep(parsed.value(), std::move(map).value());
  return parsed;
}

// Installs the SIGBUS handler described above (once; later calls do nothing). A fault outside every
// mapped_file goes to the handler that was there before (the default kills the process).
void mapped_file_survive_truncation();

// Reads past the end of a mapped file survived so far, in the whole process.
uint64_t mapped_file_faults();

}  // namespace hearth
