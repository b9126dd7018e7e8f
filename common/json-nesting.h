// JSON text scanned for its structure without parsing it: json_nesting_depth, how deeply it
// nests, measured before a recursive parser (or serializer) sees it, so that a line of a million
// '[' is refused rather than overflowing the stack; json_string_skip, the strings passed over, for
// that and for other scans of brackets (a call's end in model output).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace hearth {

// Fed every byte of a JSON text in order, says which belong to strings, where brackets do not
// count.
class json_string_skip {
 public:
  // True when text[i] is part of a string, its quotes included; then `i` may be moved past the
  // byte an escape (a backslash) covers.
  bool in_string(std::string_view text, size_t& i) {
    const char c = text[i];
    if (in_string_) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string_ = false;
      }
      return true;
    }
    if (c == '"') in_string_ = true;
    return in_string_;
  }

 private:
  bool in_string_ = false;
};

// The deepest nesting of arrays and objects in `text`: brackets inside strings are not counted,
// and a closing bracket with nothing open is ignored. Text that is not JSON gets a number too;
// the parser that follows refuses it.
inline size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  json_string_skip strings;
  for (size_t i = 0; i < text.size(); ++i) {
    if (strings.in_string(text, i)) continue;
    const char c = text[i];
    if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace hearth
