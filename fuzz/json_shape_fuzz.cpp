// libFuzzer target for json_shape_of (schema/json-shape.cpp), the JSON check of job parameters made
// without a JSON library, held against nlohmann-json's parser: on every input they agree on
// whether it is JSON (but for what json_shape_of refuses as nested deeper than its bound), and on
// the kind and top-level members of what is. An accepted text has no NUL byte, which nlohmann
// reads as the end of the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz-check.h"
#include "schema/json-shape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hearth::wire::json_kind;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto shape = hearth::wire::json_shape_of(text);
  if (!shape) {
    FUZZ_CHECK(!shape.message().empty());
    if (shape.message().starts_with("nested deeper than")) return 0;
    // nlohmann-json takes a NUL byte outside a string for the end of the input (its lexer reads
    // C strings too) and accepts what came before it; JSON has no NUL outside strings.
    if (text.find('\0') != std::string_view::npos) return 0;
    FUZZ_CHECK(!nlohmann::json::accept(text.begin(), text.end()));
    return 0;
  }
  const nlohmann::json j =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!j.is_discarded());
  switch (shape->kind) {
    case json_kind::null:
      FUZZ_CHECK(j.is_null());
      break;
    case json_kind::boolean:
      FUZZ_CHECK(j.is_boolean());
      break;
    case json_kind::number:
      FUZZ_CHECK(j.is_number());
      break;
    case json_kind::string:
      FUZZ_CHECK(j.is_string());
      break;
    case json_kind::array: {
      FUZZ_CHECK(j.is_array() && j.size() == shape->members);
      bool objects = true;
      for (const auto& e : j) objects = objects && e.is_object();
      FUZZ_CHECK(objects == shape->members_are_objects);
      break;
    }
    case json_kind::object:
      // nlohmann keeps the last of duplicate keys; json_shape_of counts every one.
      FUZZ_CHECK(j.is_object() && j.size() <= shape->members);
      break;
  }
  return 0;
}
