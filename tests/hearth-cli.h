// The hearth CLI of this build, run by the tests whose target defines HEARTH_BIN (its path;
// tests/CMakeLists.txt), with the arguments as one shell-quoted string.
#pragma once

#include <gtest/gtest.h>

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

// A command that failed as the CLI fails: a non-zero exit code, nothing on stdout, one line on
// stderr holding `needle`.
inline void expect_error(const process_result& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace hearth::testing
