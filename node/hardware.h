// What this machine has, as the node advertises it: CPU, memory and GPUs (the device registry,
// gpu/registry.h).
#pragma once

#include "gpu/device.h"
#include "schema/messages.h"

namespace hearth::node {

// The wire's description of a device (schema/messages.h), filled here and nowhere else.
wire::gpu_info gpu_info_from(const gpu::device& d);

// Logs which backends loaded and why the others did not (once per call: at start).
wire::hardware_info hardware_discover();

}  // namespace hearth::node
