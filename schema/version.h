// What every hearth binary prints for --version: the release (CMakeLists.txt's project version)
// and the wire protocol's signature, so that two machines can tell whether they can talk.
#pragma once

#include <string>
#include <string_view>

namespace hearth::wire {

// "PROGRAM 0.1.0 (protocol HEARTH/1)".
std::string version_line(std::string_view program);

}  // namespace hearth::wire
