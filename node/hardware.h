// What this machine has, as the node advertises it: CPU, memory and GPUs (gpu/discovery.h).
#pragma once

#include "schema/messages.h"

namespace hearth::node {

wire::hardware_info hardware_discover();

}  // namespace hearth::node
