// replace_all: every occurrence of a string replaced, left to right (the vocabulary's and the
// Hugging Face tokenizer import's U+2581 <-> space).
#pragma once

#include <string>
#include <string_view>

namespace hearth {

// `s` with every non-overlapping occurrence of `from` (not empty), leftmost first, replaced by
// `to`.
inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace hearth
