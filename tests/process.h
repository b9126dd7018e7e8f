// Running a command line from a test, as a user would in a shell: the exit code, stdout and
// stderr. Used by the tests that drive the hearth binary (cli, mkmodel, quantize).
#pragma once

#include <string>

namespace hearth::testing {

struct process_result {
  int exit_code = -1;  // -1 when the command could not start or was killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs `command` through /bin/sh and waits for it; stderr goes through a file in the test's
// temporary directory.
process_result run_command(const std::string& command);

// `s` as one single-quoted shell word.
std::string shell_quote(const std::string& s);

}  // namespace hearth::testing
