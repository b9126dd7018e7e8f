#include "engine/import/tokenizer-metadata.h"

#include <utility>

namespace hearth {

gguf_value gguf_string_value(std::string s) {
  gguf_value v;
  v.type = gguf_value_type::string;
  v.str = std::move(s);
  return v;
}

gguf_value gguf_bool_value(bool b) {
  gguf_value v;
  v.type = gguf_value_type::boolean;
  v.u = b ? 1 : 0;
  return v;
}

gguf_value gguf_u32_value(uint32_t x) {
  gguf_value v;
  v.type = gguf_value_type::u32;
  v.u = x;
  return v;
}

gguf_value gguf_i32_value(int32_t x) {
  gguf_value v;
  v.type = gguf_value_type::i32;
  v.i = x;
  return v;
}

gguf_value gguf_string_array_value(std::vector<std::string> items) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = gguf_value_type::string;
  v.items.reserve(items.size());
  for (std::string& s : items) v.items.push_back(gguf_string_value(std::move(s)));
  return v;
}

gguf_value gguf_f32_array_value(const std::vector<float>& items) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = gguf_value_type::f32;
  v.items.reserve(items.size());
  for (const float x : items) {
    gguf_value item;
    item.type = gguf_value_type::f32;
    item.f = x;
    v.items.push_back(std::move(item));
  }
  return v;
}

gguf_value gguf_i32_array_value(const std::vector<int32_t>& items) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = gguf_value_type::i32;
  v.items.reserve(items.size());
  for (const int32_t x : items) v.items.push_back(gguf_i32_value(x));
  return v;
}

}  // namespace hearth
