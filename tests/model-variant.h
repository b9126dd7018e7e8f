// Variants of the real stories260K model written for a test: a copy with edited metadata or
// tensors, in the test's temporary folder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// stories260K split into `n_parts` GGUF files as gguf-split writes them
// (engine/io/gguf-split.h), at `prefix`-0000k-of-0000n.gguf (its folder created); the parts' paths,
// the first first (empty after a test failure).
std::vector<std::string> write_stories_split(const std::string& prefix, uint32_t n_parts);

// A real chat template (teknium/OpenHermes-2.5-Mistral-7B's, chatml), for copies of stories260K
// that chat jobs can be formatted for (tokenizer.chat_template).
constexpr const char* k_chatml_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant"
    "\\n' }}{% endif %}";

}  // namespace hearth::testing
