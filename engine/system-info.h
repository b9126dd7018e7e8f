// Facts about the host machine: CPU model and cores, memory. Read from /proc on Linux.
#pragma once

#include <cstdint>
#include <string>

#include "common/format-bytes.h"  // format_bytes, which memory messages use with these

namespace hearth {

struct system_info {
  std::string cpu_model;       // "Intel(R) Xeon(R) ..." or "" when unknown
  int32_t n_threads = 1;       // hardware threads
  uint64_t mem_total = 0;      // bytes
  uint64_t mem_available = 0;  // bytes the kernel could hand out now (MemAvailable)
  bool avx2 = false;
  std::string cpu_kernels;  // the CPU backend's path: "avx2", "neon-dotprod", ... (cpu-features.h)
};

system_info system_info_read();

}  // namespace hearth
