// The hearth CLI of this build, run by the tests whose target defines HEARTH_BIN (its path;
// tests/CMakeLists.txt), with the arguments as one shell-quoted string.
#pragma once

#include <string>

#include "tests/process.h"

#ifndef HEARTH_BIN
#error "tests/hearth-cli.h is for test targets that define HEARTH_BIN"
#endif

namespace hearth::testing {

// Runs the hearth binary with a shell-quoted argument string.
inline process_result hearth(const std::string& args) {
  return run_command(std::string(HEARTH_BIN) + " " + args);
}

// `s` as one shell word.
inline std::string quote(const std::string& s) {
  return shell_quote(s);
}

}  // namespace hearth::testing
