// Variants of the real stories260K model written for a test: a copy with edited metadata or
// tensors, in the test's temporary folder.
#pragma once

#include <functional>
#include <string>

#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"

namespace hearth::testing {

// Edits applied while copying stories260K: a metadata override and a per-tensor hook that
// writes its own replacement (type, shape, data) or drops the tensor, returning true either way.
struct model_edit {
  std::function<void(gguf_writer&)> metadata;
  std::function<bool(const gguf_tensor&, gguf_writer&)> tensor;
};

// Writes the edited copy as <temp>/hearth_<name>.gguf and returns its path.
std::string write_stories_variant(const std::string& name, const model_edit& e);

}  // namespace hearth::testing
