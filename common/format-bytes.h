// A byte count for people: "1.50 GiB", "12.0 MiB", "3.5 KiB" (binary units), as every message
// about memory, disk and model sizes prints it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace hearth {

inline std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
  } else if (bytes >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1ull << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  }
  return buf;
}

}  // namespace hearth
