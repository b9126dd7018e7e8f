// Errors of the CUDA runtime and cuBLAS as exceptions with one line that names the call, for
// the backend's callers to print and for backends/select.cpp to fall back to the CPU on.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace hearth::cuda {

// Thrown for every CUDA failure; out-of-memory errors say what did not fit (device.cpp).
struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);

}  // namespace hearth::cuda

// Evaluates a runtime API call; anything but cudaSuccess throws cuda_error naming the call.
#define HEARTH_CUDA_CHECK(call)                                                         \
  do {                                                                                  \
    const cudaError_t hearth_cuda_status_ = (call);                                     \
    if (hearth_cuda_status_ != cudaSuccess)                                             \
      ::hearth::cuda::throw_cuda_error(hearth_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)
