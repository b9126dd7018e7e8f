#include "schema/version.h"

#include "schema/messages.h"

namespace hearth::wire {

std::string version_line(std::string_view program) {
  return std::string(program) + " " + HEARTH_VERSION + " (protocol " + std::string(signature) + ")";
}

}  // namespace hearth::wire
