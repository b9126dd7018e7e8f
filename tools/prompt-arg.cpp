#include "tools/prompt-arg.h"

#include <iostream>
#include <iterator>

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

}  // namespace hearth::cli
