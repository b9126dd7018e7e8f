// What this machine has, as the node advertises it: CPU, memory and GPUs (the device registry,
// backends/registry.h).
#pragma once

#include "backends/device.h"
#include "backends/registry.h"
#include "schema/messages.h"

namespace hearth::node {

// The wire's description of a device (schema/messages.h), filled here and nowhere else.
wire::gpu_info gpu_info_from(const gpu::device& d);

// Logs which backends loaded and why the others did not (once per call: at start).
wire::hardware_info hardware_discover();
// The same without the log: what the machine has now (free memory, utilisation), read again
// while the node runs. A card two backends see (an NVIDIA GPU through CUDA and Vulkan: the same
// UUID) is listed once, as the backend listed first in the registry sees it, so that its memory
// is not counted twice.
wire::hardware_info hardware_read(const gpu::registry& devices = gpu::device_registry());
// Whether `now` differs from `sent` enough to tell the broker: a device added or gone, free
// memory moved by 64 MiB or more, utilisation by 5 points or more. Smaller moves would cost a
// message and a database write every few seconds for nothing.
bool hardware_changed(const wire::hardware_info& sent, const wire::hardware_info& now);

}  // namespace hearth::node
