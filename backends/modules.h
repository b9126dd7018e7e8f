// Finding and loading the GPU backend modules (backends/module.h). A module libhearth-<name>.so is
// looked for, in order:
//   - only in the folders of HEARTH_BACKEND_PATH (':'-separated) when that is set, so that a test
//     or an operator decides exactly which modules a process sees;
//   - else next to the executable, then in ../lib/hearth relative to it (the install layout,
//     and the build tree's: every executable is one folder below build/<preset>/).
#pragma once

#include <string>
#include <vector>

#include "backends/registry.h"

namespace hearth::gpu {

// The folders searched, in order.
std::vector<std::string> backend_module_dirs();

// The module of backend `kind` as a registry entry: loaded, with its devices, or not loaded with
// why (not found and where it was looked for; dlopen's message, e.g. a library it needs missing;
// no entry point; another API version). Never throws. Never unloaded.
backend_entry backend_module_load(backend_kind kind, const std::string& title);

}  // namespace hearth::gpu
