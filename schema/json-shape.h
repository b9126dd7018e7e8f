// Whether text is one well-formed JSON value (RFC 8259, UTF-8), and its outline: the check of the
// JSON that job parameters carry as text (api_params' tools, json_schema, template_kwargs), made
// where the request arrives (hearth submit, the broker, the node) without a JSON library, which
// hearth_schema does not link. It builds nothing: one pass over the bytes, recursion bounded by
// json_shape_max_depth, so hostile text costs time linear in its length and a fixed stack.
// fuzz/json_shape_fuzz.cpp holds it against nlohmann-json's parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace hearth::wire {

enum class json_kind : uint8_t { null, boolean, number, string, array, object };

// "an object", "an array", "null", ... (for messages: "tools must be an array, got an object")
const char* json_kind_name(json_kind k);

// Arrays and objects nested deeper than this are refused: deep enough for any JSON Schema or tool
// definition people write (each level of a schema's `properties` is two), shallow enough that
// whoever later walks the value recursively (the node's JSON parser, a template's `tojson`) is
// safe.
inline constexpr size_t json_shape_max_depth = 64;

struct json_shape {
  json_kind kind = json_kind::null;  // the top-level value's
  size_t members = 0;                // a top-level array's elements or object's keys
  bool members_are_objects = true;   // every element of a top-level array is an object
};

// The shape of `text` (whitespace around the value allowed), or what is wrong and at which byte:
// "expected a value at byte 7", "invalid UTF-8 at byte 12", "nested deeper than 64 at byte 70".
// Duplicate keys are allowed, as RFC 8259 allows them; a number whose value overflows a double is
// not, as the parsers that read the text later refuse it.
result<json_shape> json_shape_of(std::string_view text);

}  // namespace hearth::wire
