// The GPU's device-memory read bandwidth: what a decoding step (which streams every weight once)
// can reach at best. Reads a buffer much larger than the L2 cache with 16-byte loads, a few
// times, timed with CUDA events; prints the best pass beside the peak the memory clock and bus
// width give. bench/cuda-speed.sh divides by the measured figure.
//
// Usage: cuda-bandwidth [--device N] [--gib G] [--json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

__global__ void read_all(const int4* __restrict__ p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(p + i);  // streaming: do not keep it in cache
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) *sink = acc;  // never true for zeroed memory; keeps the loads
}

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "cuda-bandwidth: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  double gib = 4;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      device = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--gib") && i + 1 < argc)
      gib = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--json"))
      json = true;
    else {
      std::fprintf(stderr, "usage: cuda-bandwidth [--device N] [--gib G] [--json]\n");
      return 2;
    }
  }
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return fail("cudaSetDevice", e);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
  const double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9;

  const size_t bytes = size_t(gib * double(1ull << 30)) / 16 * 16;
  int4* buf = nullptr;
  int* sink = nullptr;
  if ((e = cudaMalloc(&buf, bytes)) != cudaSuccess) return fail("cudaMalloc", e);
  if ((e = cudaMalloc(&sink, sizeof(int))) != cudaSuccess) return fail("cudaMalloc", e);
  cudaMemset(buf, 0, bytes);
  const int threads = 256;
  const int blocks = prop.multiProcessorCount * 8;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double best = 0;
  for (int pass = 0; pass < 6; ++pass) {
    cudaEventRecord(start);
    read_all<<<blocks, threads>>>(buf, bytes / 16, sink);
    cudaEventRecord(stop);
    if ((e = cudaEventSynchronize(stop)) != cudaSuccess) return fail("read kernel", e);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (pass > 0) best = std::max(best, double(bytes) / (ms * 1e-3) / 1e9);  // pass 0 warms up
  }
  if (json) {
    std::printf("{\"device\": \"%s\", \"gbps\": %.1f, \"peak_gbps\": %.1f, \"bytes\": %zu}\n",
                prop.name, best, peak, bytes);
  } else {
    std::printf("%s: read %.1f GB/s (peak from memory clock and bus width: %.1f GB/s, %.0f%%)\n",
                prop.name, best, peak, peak > 0 ? 100 * best / peak : 0.0);
  }
  cudaFree(buf);
  cudaFree(sink);
  return 0;
}
