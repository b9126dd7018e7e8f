// NVML's name of a CUDA device, from the UUID the runtime gives: the key that matches the two
// (nvml.h). NVML itself cannot run here without an NVIDIA driver.
#include "backends/cuda/nvml.h"

#include <gtest/gtest.h>

namespace hearth::cuda {
namespace {

TEST(CudaNvml, UuidIsNamedAsNvidiaSmiShowsIt) {
  const char uuid[16] = {'\x5d', '\x0b', '\x8e', '\xa6', '\x5e', '\x1e', '\x7b', '\x8f',
                         '\x00', '\x10', '\xfa', '\xce', '\xb0', '\x0c', '\x12', '\xff'};
  EXPECT_EQ(nvml_uuid(uuid), "GPU-5d0b8ea6-5e1e-7b8f-0010-faceb00c12ff");
}

TEST(CudaNvml, UnknownDeviceHasNoUtilization) {
  // No GPU has the nil UUID: -1 with or without NVML on this machine.
  const char nil[16] = {};
  EXPECT_LT(nvml_utilization(nil), 0);
}

}  // namespace
}  // namespace hearth::cuda
