#include "tools/prompt-arg.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>

namespace hearth::cli {

void prompt_arg::add_to(CLI::App* cmd) {
  flag = cmd->add_option("-p,--prompt", text, "Prompt text; - reads it from stdin");
  positional = cmd->add_option("text", text, "Prompt text (instead of -p)");
  positional->excludes(flag);
}

const std::string& prompt_arg::read() {
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
  return text;
}

std::string request_file_read(const std::string& path, size_t max_bytes, const std::string& what) {
  std::ifstream file;
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw std::runtime_error(what + " " + path + ": a directory, not a file");
    file.open(path, std::ios::binary);
    if (!file) throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
  }
  std::istream& in = path == "-" ? std::cin : file;
  // One byte more than allowed tells a file at the limit from a larger one without reading it all.
  std::string text(max_bytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  if (in.bad()) throw std::runtime_error(what + " " + path + ": cannot be read");
  if (text.size() > max_bytes) {
    throw std::runtime_error(what + " " + path + ": larger than " + std::to_string(max_bytes) +
                             " bytes");
  }
  return text;
}

}  // namespace hearth::cli
