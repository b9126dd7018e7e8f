// Loading a model from the CLI, with a progress bar for large files.
#pragma once

#include <memory>
#include <string>

#include "engine/model.h"

namespace hearth::cli {

// Loads `path` with `threads` CPU threads (<= 0: all). Shows a progress bar on stderr while the
// weights are paged in if stderr is a terminal and the file is larger than 64 MiB.
std::unique_ptr<model> load_model(const std::string& path, int threads);

// "1,2,3" -> {1, 2, 3}; throws naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& s);

}  // namespace hearth::cli
