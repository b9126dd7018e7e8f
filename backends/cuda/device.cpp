#include "backends/cuda/device.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "backends/cuda/check.h"
#include "backends/cuda/nvml.h"
#include "engine/system-info.h"

namespace hearth::cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  // The runtime keeps some errors sticky until read; clear it so later calls are not blamed.
  cudaGetLastError();
  char where[64];
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  std::snprintf(where, sizeof where, " (%s:%d)", base, line);
  throw cuda_error(std::string("cuda: ") + cudaGetErrorString(e) + " in " + call + where);
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  if (e == cudaErrorInsufficientDriver) return "no NVIDIA driver (libcuda) found";
  if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) return "no CUDA device";
  if (e != cudaSuccess) return std::string("CUDA unavailable: ") + cudaGetErrorString(e);
  return "";
}

std::vector<gpu::device> devices() {
  std::vector<gpu::device> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  int current = 0;
  cudaGetDevice(&current);
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    gpu::device d;
    d.name = p.name;
    d.backend = gpu::backend_kind::cuda;
    d.index = i;
    // Integrated parts (Jetson) share system memory with the CPU.
    d.type = p.integrated ? gpu::device_type::integrated : gpu::device_type::discrete;
    d.vendor = "NVIDIA";
    d.memory_total = p.totalGlobalMem;
    d.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
    d.detail = "compute capability " + d.compute_capability + ", " +
               std::to_string(p.multiProcessorCount) + " SMs";
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess &&
        clock_khz > 0 && bus_bits > 0) {
      // Double data rate: two transfers per clock on each bit of the bus.
      const double gbs = 2.0 * double(clock_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9;
      d.detail += ", " + std::to_string(int64_t(gbs)) + " GB/s peak";
    }
    // Free memory needs a context on the device; creating one costs a few hundred MiB of
    // device memory for the life of the process, which the backend would create anyway.
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      d.memory_free = free_b;
      d.memory_total = total_b;
    }
    d.heaps.push_back({d.memory_total, true});
    d.utilization = nvml_utilization(p.uuid.bytes);
    unsigned char uuid[16];
    std::memcpy(uuid, p.uuid.bytes, sizeof uuid);
    d.uuid = gpu::uuid_hex(uuid);
    cudaGetLastError();
    out.push_back(std::move(d));
  }
  cudaSetDevice(current);
  cudaGetLastError();
  return out;
}

void* device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw cuda_error("cuda: out of device memory: " + std::string(what) + " needs " +
                     format_bytes(bytes) + " but only " + format_bytes(free_b) + " of " +
                     format_bytes(total_b) + " are free");
  }
  if (e != cudaSuccess) throw_cuda_error(e, "cudaMalloc", __FILE__, __LINE__);
  return p;
}

void device_free(void* p) {
  if (p) cudaFree(p);
}

}  // namespace hearth::cuda
