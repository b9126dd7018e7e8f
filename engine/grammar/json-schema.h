// JSON Schema -> GBNF (engine/grammar/grammar.h), as llama.cpp's json-schema-to-grammar does,
// for `response_format` json_schema and tool-call arguments; and the grammar of any JSON object
// for `response_format` json_object.
//
// Supported (OpenAI's strict subset and more): type (one or an array, "null" included), object
// with properties / required / additionalProperties (false, true or absent: only the declared
// properties are generated, which every such schema accepts; a schema as additionalProperties of
// an object without properties: a map of string keys to it), string with enum / const /
// minLength / maxLength / format (date, time, date-time, uuid; others ignored, as format is an
// annotation), number and integer with minimum / maximum / exclusiveMinimum / exclusiveMaximum
// (integer bounds exact; a number's bounds rounded inwards to integers, its fraction allowed
// where the whole part keeps it in range), boolean, null, array with items / prefixItems /
// minItems / maxItems, anyOf and oneOf (both as a choice), allOf of one schema, enum / const of
// any JSON value, $ref to "#", "#/$defs/..." and "#/definitions/..." (any local JSON pointer;
// recursion allowed), {} and true = any JSON value. Refused with an error naming the keyword and
// its path: pattern, not, if/then/else, remote $ref, allOf of several schemas, impossible bounds.
//
// Properties keep the order the schema text gives them. Whitespace between tokens is bounded
// (at most one newline and 20 spaces or tabs), numbers have at most 16 digits before and after
// the point, so a generation that follows the grammar always ends.
//
// Bounds: schema text <= grammar_max_text bytes, nesting <= 64, <= 4096 properties per object.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth {

// A whole grammar ("root ::= ..."); "{}" gives any JSON value.
result<std::string> json_schema_to_gbnf(std::string_view schema_json);

// Rules only, every name starting with `rule_prefix` (letters, digits, '-'), the schema's
// value named `<rule_prefix>root`: to embed in a larger grammar (a tool call's arguments) that
// refers to that rule. The shared JSON rules (strings, numbers, whitespace) are prefixed too, so
// two schemas with different prefixes never collide.
result<std::string> json_schema_to_gbnf_rules(std::string_view schema_json,
                                              std::string_view rule_prefix);

// Any JSON object with bounded whitespace: response_format {"type": "json_object"}.
std::string json_object_gbnf();

}  // namespace hearth
