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

namespace {

// An array of `elem` values, one made by `make` from each of `items` (taken by `make` as
// `items` gives them: a non-const vector's items may be moved from).
template <class Items, class Make>
gguf_value array_value(gguf_value_type elem, Items& items, Make make) {
  gguf_value v;
  v.type = gguf_value_type::array;
  v.elem_type = elem;
  v.items.reserve(items.size());
  for (auto& x : items) v.items.push_back(make(x));
  return v;
}

}  // namespace

gguf_value gguf_string_array_value(std::vector<std::string> items) {
  return array_value(gguf_value_type::string, items,
                     [](std::string& s) { return gguf_string_value(std::move(s)); });
}

gguf_value gguf_f32_array_value(const std::vector<float>& items) {
  return array_value(gguf_value_type::f32, items, [](float x) {
    gguf_value item;
    item.type = gguf_value_type::f32;
    item.f = x;
    return item;
  });
}

gguf_value gguf_i32_array_value(const std::vector<int32_t>& items) {
  return array_value(gguf_value_type::i32, items, gguf_i32_value);
}

}  // namespace hearth
