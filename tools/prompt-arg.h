// The prompt of `hearth run` and `hearth submit`, given the same way to both: `-p TEXT`, or the
// text as the last argument, and `-` for standard input (a prompt from a file or a pipe).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace hearth::cli {

struct prompt_arg {
  std::string text;
  CLI::Option* flag = nullptr;        // -p,--prompt
  CLI::Option* positional = nullptr;  // TEXT

  // Adds both to `cmd`; they exclude each other.
  void add_to(CLI::App* cmd);
  bool given() const { return flag->count() + positional->count() > 0; }
  // The text, read from standard input when it is "-" (call once the command's checks passed:
  // a command that fails its checks does not wait for input).
  const std::string& read();
};

// The text of a file a request carries (hearth submit --tools, --json-schema, --grammar): read
// whole, "-" for standard input; at most `max_bytes`, else an error naming `what` (the option)
// and the file, as is one that cannot be read.
std::string request_file_read(const std::string& path, size_t max_bytes, const std::string& what);

}  // namespace hearth::cli
