#include "engine/system-info.h"

#include <cstdio>
#include <fstream>
#include <thread>

#include "engine/io/cpu-features.h"

namespace hearth {

system_info system_info_read() {
  system_info s;
  s.n_threads = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  s.avx2 = cpu_has_avx2();
  s.cpu_kernels = cpu_kernel_path();
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos)
        s.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    uint64_t kib = 0;
    std::string unit;
    meminfo >> kib >> unit;
    if (key == "MemTotal:") s.mem_total = kib * 1024;
    if (key == "MemAvailable:") s.mem_available = kib * 1024;
  }
  return s;
}

}  // namespace hearth
