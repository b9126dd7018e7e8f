#include "tests/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "tests/testdata.h"

namespace hearth::testing {

process_result run_command(const std::string& command) {
  const std::string err_file =
      ::testing::TempDir() + "hearth_stderr_" + std::to_string(::getpid()) + ".txt";
  process_result r;
  FILE* p = popen((command + " 2>" + err_file).c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file_text(err_file);
  std::remove(err_file.c_str());
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace hearth::testing
