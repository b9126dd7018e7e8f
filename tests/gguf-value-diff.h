// How two GGUF metadata values differ, for the GGUF unit tests and the GGUF fuzzer, which both
// check that what the writer wrote reads back the same. Header-only: the fuzzer links no test
// library.
#pragma once

#include <cstring>
#include <sstream>
#include <string>

#include "engine/io/gguf.h"

namespace hearth::testing {

// "" when `a` and `b` are the same value (the fields that matter for its type; floats bit for
// bit), else what differs: "type u8 vs i8", "3 vs 4", "array of 2 u8 vs 3 u8", "1 vs 2 (item 5)".
inline std::string gguf_value_difference(const gguf_value& a, const gguf_value& b) {
  std::ostringstream o;
  if (a.type != b.type) {
    o << "type " << gguf_value_type_name(a.type) << " vs " << gguf_value_type_name(b.type);
    return o.str();
  }
  switch (a.type) {
    case gguf_value_type::u8:
    case gguf_value_type::u16:
    case gguf_value_type::u32:
    case gguf_value_type::u64:
    case gguf_value_type::boolean:
      if (a.u != b.u) o << a.u << " vs " << b.u;
      break;
    case gguf_value_type::i8:
    case gguf_value_type::i16:
    case gguf_value_type::i32:
    case gguf_value_type::i64:
      if (a.i != b.i) o << a.i << " vs " << b.i;
      break;
    case gguf_value_type::f32:
    case gguf_value_type::f64:
      if (std::memcmp(&a.f, &b.f, sizeof(double)) != 0) o << a.f << " vs " << b.f;
      break;
    case gguf_value_type::string:
      if (a.str != b.str) o << a.str << " vs " << b.str;
      break;
    case gguf_value_type::array:
      if (a.elem_type != b.elem_type || a.items.size() != b.items.size()) {
        o << "array of " << a.items.size() << " " << gguf_value_type_name(a.elem_type) << " vs "
          << b.items.size() << " " << gguf_value_type_name(b.elem_type);
        break;
      }
      for (size_t k = 0; k < a.items.size(); ++k) {
        const std::string d = gguf_value_difference(a.items[k], b.items[k]);
        if (!d.empty()) return d + " (item " + std::to_string(k) + ")";
      }
      break;
  }
  return o.str();
}

}  // namespace hearth::testing
