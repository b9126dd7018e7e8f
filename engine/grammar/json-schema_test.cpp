// JSON Schema -> GBNF: every keyword compiled and checked on documents it must accept and
// refuse (byte by byte through the matcher), the refusals naming keyword and path, and the
// bounds on hostile schemas.
#include "engine/grammar/json-schema.h"

#include <gtest/gtest.h>

#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/grammar.h"

namespace hearth {
namespace {

std::shared_ptr<const grammar_vocab> byte_vocab() {
  return grammar_vocab::bytes();
}

class schema_check {
 public:
  explicit schema_check(std::string_view schema) {
    auto gbnf = json_schema_to_gbnf(schema);
    EXPECT_TRUE(gbnf.ok()) << gbnf.message();
    if (!gbnf.ok()) return;
    text_ = *gbnf;
    auto g = grammar_from_gbnf(*gbnf);
    EXPECT_TRUE(g.ok()) << g.message() << "\n" << *gbnf;
    if (g.ok()) g_ = *g;
  }
  // The whole document matches.
  bool accepts(std::string_view doc) const {
    if (!g_) return false;
    grammar_matcher m(g_, byte_vocab());
    return m.accept_bytes(doc) && m.can_end();
  }
  const std::string& gbnf() const { return text_; }

 private:
  std::string text_;
  std::shared_ptr<const grammar> g_;
};

std::string schema_error(std::string_view schema) {
  auto r = json_schema_to_gbnf(schema);
  return r.ok() ? "(compiled)" : r.message();
}

TEST(json_schema, any_value_and_json_object) {
  schema_check any("{}");
  EXPECT_TRUE(any.accepts(R"({"a": [1, 2.5e3, "x\u00e9\n", true, null, {}]})"));
  EXPECT_TRUE(any.accepts("-0.5"));
  EXPECT_TRUE(any.accepts("\"\""));
  EXPECT_FALSE(any.accepts("{'a': 1}"));
  EXPECT_FALSE(any.accepts("[1,]"));
  EXPECT_FALSE(any.accepts("\"a\x01\""));  // control characters must be escaped
  EXPECT_FALSE(any.accepts("01"));
  // \u escapes: surrogates only as a high-low pair.
  EXPECT_TRUE(any.accepts(R"("\u00e9\ud83d\ude00\uFFFF")"));
  EXPECT_FALSE(any.accepts(R"("\udb51")"));
  EXPECT_FALSE(any.accepts(R"("\udb51x")"));
  EXPECT_FALSE(any.accepts(R"("\ude00")"));
  auto obj = grammar_from_gbnf(json_object_gbnf());
  ASSERT_TRUE(obj.ok()) << obj.message();
  grammar_matcher m(*obj, byte_vocab());
  EXPECT_FALSE(m.accept_bytes("[]"));
  EXPECT_TRUE(m.accept_bytes("{\n  \"k\": [1, {\"n\": null}]\n}"));
  EXPECT_TRUE(m.can_end());
}

TEST(json_schema, strict_object_with_required_and_optional_properties) {
  schema_check s(R"({"type": "object", "additionalProperties": false,
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age"]})");
  EXPECT_TRUE(s.accepts(R"({"name": "Ann", "age": 31})"));
  EXPECT_TRUE(s.accepts(R"({"name":"Ann","age":31,"tags":["a","b"]})"));
  EXPECT_FALSE(s.accepts(R"({"age": 31, "name": "Ann"})"));  // declared order
  EXPECT_FALSE(s.accepts(R"({"name": "Ann"})"));
  EXPECT_FALSE(s.accepts(R"({"name": "Ann", "age": 31, "x": 1})"));
  EXPECT_FALSE(s.accepts(R"({"name": "Ann", "age": 3.5})"));
  // No required property: any subset in order, commas right.
  schema_check opt(R"({"type": "object", "properties": {"a": {"type": "boolean"},
    "b": {"type": "null"}, "c": {"type": "number"}}})");
  EXPECT_TRUE(opt.accepts("{}"));
  EXPECT_TRUE(opt.accepts(R"({"b": null})"));
  EXPECT_TRUE(opt.accepts(R"({"a": true, "c": -1.5})"));
  EXPECT_TRUE(opt.accepts(R"({"a": false, "b": null, "c": 2e5})"));
  EXPECT_FALSE(opt.accepts(R"({, "b": null})"));
  EXPECT_FALSE(opt.accepts(R"({"c": 1, "a": true})"));
  // A map of one schema.
  schema_check map(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(map.accepts(R"({"x": 1, "y": 2})"));
  EXPECT_FALSE(map.accepts(R"({"x": "1"})"));
}

TEST(json_schema, strings_enums_and_const) {
  schema_check len(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(len.accepts(R"("a")"));
  EXPECT_TRUE(len.accepts(R"("ab")"));
  EXPECT_TRUE(len.accepts(R"("a\"é")"));  // characters, not bytes; an escape is one
  EXPECT_FALSE(len.accepts(R"("abcd")"));
  schema_check e(R"({"enum": ["red", 3, null, {"k": [1]}]})");
  EXPECT_TRUE(e.accepts(R"("red")"));
  EXPECT_TRUE(e.accepts("3"));
  EXPECT_TRUE(e.accepts("null"));
  EXPECT_TRUE(e.accepts(R"({"k":[1]})"));
  EXPECT_FALSE(e.accepts(R"("blue")"));
  schema_check c(R"({"const": "x\"y"})");
  EXPECT_TRUE(c.accepts(R"("x\"y")"));
  EXPECT_FALSE(c.accepts(R"("xy")"));
  schema_check date(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(date.accepts(R"("2024-02-29")"));
  EXPECT_FALSE(date.accepts(R"("2024-13-01")"));
  schema_check uuid(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(uuid.accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(uuid.accepts(R"("123e4567")"));
  schema_check dt(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(dt.accepts(R"("2024-01-02T03:04:05Z")"));
  EXPECT_TRUE(dt.accepts(R"("2024-01-02T03:04:05.123+02:00")"));
}

TEST(json_schema, integer_bounds_are_exact) {
  schema_check s(R"({"type": "integer", "minimum": -12, "maximum": 107})");
  for (int i = -30; i <= 130; ++i) {
    EXPECT_EQ(s.accepts(std::to_string(i)), i >= -12 && i <= 107) << i;
  }
  EXPECT_FALSE(s.accepts("007"));
  EXPECT_FALSE(s.accepts("-0"));
  schema_check ex(R"({"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 1000})");
  EXPECT_FALSE(ex.accepts("5"));
  EXPECT_TRUE(ex.accepts("6"));
  EXPECT_TRUE(ex.accepts("999"));
  EXPECT_FALSE(ex.accepts("1000"));
  schema_check lo(R"({"type": "integer", "minimum": 250})");
  EXPECT_FALSE(lo.accepts("249"));
  EXPECT_TRUE(lo.accepts("250"));
  EXPECT_TRUE(lo.accepts("123456789012"));
  EXPECT_FALSE(lo.accepts("-300"));
  EXPECT_NE(schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("no integer"),
            std::string::npos);
}

TEST(json_schema, number_bounds_hold) {
  schema_check s(R"({"type": "number", "minimum": -2, "maximum": 3})");
  EXPECT_TRUE(s.accepts("-2"));
  EXPECT_TRUE(s.accepts("-1.75"));
  EXPECT_TRUE(s.accepts("-0.5"));
  EXPECT_TRUE(s.accepts("2.999"));
  EXPECT_TRUE(s.accepts("3"));
  EXPECT_FALSE(s.accepts("3.5"));
  EXPECT_FALSE(s.accepts("-2.5"));
  EXPECT_FALSE(s.accepts("4"));
  EXPECT_NE(schema_error(R"({"type": "number", "minimum": 0.2, "maximum": 0.7})").find("rounded"),
            std::string::npos);
}

TEST(json_schema, arrays_bounds_and_tuples) {
  schema_check s(
      R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})");
  EXPECT_FALSE(s.accepts("[]"));
  EXPECT_TRUE(s.accepts("[true]"));
  EXPECT_TRUE(s.accepts("[true, false, true]"));
  EXPECT_FALSE(s.accepts("[true, false, true, true]"));
  schema_check any(R"({"type": "array", "maxItems": 2})");
  EXPECT_TRUE(any.accepts("[]"));
  EXPECT_TRUE(any.accepts(R"([1, "a"])"));
  EXPECT_FALSE(any.accepts("[1, 2, 3]"));
  schema_check tuple(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}]})");
  EXPECT_TRUE(tuple.accepts(R"([1, "a"])"));
  EXPECT_FALSE(tuple.accepts(R"(["a", 1])"));
}

TEST(json_schema, any_of_nullable_types_and_refs) {
  schema_check n(R"({"type": ["string", "null"], "maxLength": 2})");
  EXPECT_TRUE(n.accepts("null"));
  EXPECT_TRUE(n.accepts(R"("ab")"));
  EXPECT_FALSE(n.accepts(R"("abc")"));
  EXPECT_FALSE(n.accepts("1"));
  schema_check a(R"({"anyOf": [{"type": "integer"}, {"type": "object", "properties":
    {"x": {"const": 1}}, "required": ["x"]}]})");
  EXPECT_TRUE(a.accepts("12"));
  EXPECT_TRUE(a.accepts(R"({"x": 1})"));
  EXPECT_FALSE(a.accepts(R"({"x": 2})"));
  schema_check o(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})");
  EXPECT_TRUE(o.accepts("null"));
  // Recursive $ref through $defs, and definitions.
  schema_check tree(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
    "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v", "kids"], "additionalProperties": false}}})");
  EXPECT_TRUE(tree.accepts(R"({"v": 1, "kids": [{"v": 2, "kids": []}]})"));
  EXPECT_FALSE(tree.accepts(R"({"v": 1, "kids": [{"v": 2}]})"));
  schema_check defs(R"({"type": "object", "properties": {"p": {"$ref": "#/definitions/pos"}},
    "required": ["p"], "definitions": {"pos": {"type": "integer", "minimum": 0}}})");
  EXPECT_TRUE(defs.accepts(R"({"p": 4})"));
  EXPECT_FALSE(defs.accepts(R"({"p": -4})"));
}

TEST(json_schema, refusals_name_keyword_and_path) {
  EXPECT_EQ(schema_error(
                R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}})"),
            "json schema: #/properties/a: pattern is not supported");
  EXPECT_EQ(schema_error(R"({"$ref": "https://example.com/s.json"})"),
            "json schema: #: $ref \"https://example.com/s.json\" is not local (only \"#...\" is "
            "supported)");
  EXPECT_EQ(schema_error(R"({"$ref": "#/$defs/missing"})"),
            "json schema: #: $ref \"#/$defs/missing\" points to nothing");
  EXPECT_EQ(schema_error(R"({"type": "strin"})"), "json schema: #: unknown type \"strin\"");
  EXPECT_EQ(schema_error(R"({"not": {}})"), "json schema: #: not is not supported");
  EXPECT_EQ(schema_error("false"), "json schema: #: the schema false accepts nothing");
  EXPECT_EQ(schema_error("{"), "json schema: not valid JSON");
  EXPECT_EQ(schema_error(R"({"type": "string", "maxLength": 1e12})"),
            "json schema: #: maxLength 1000000000000.0 is above the grammar's limit 1048576");
  EXPECT_EQ(schema_error(R"({"type": "string", "format": 5, "minLength": "x"})"),
            "json schema: #: minLength must be a non-negative integer");
  EXPECT_EQ(schema_error(std::string(100, '[') + std::string(100, ']')),
            "json schema: nested more than 64 deep");
  // Hostile but within bounds: a deep chain of $refs to itself compiles (recursion is a rule).
  EXPECT_EQ(schema_error(R"({"$ref": "#"})"), "(compiled)");
}

TEST(json_schema, rules_under_a_prefix_embed_in_a_larger_grammar) {
  auto a = json_schema_to_gbnf_rules(R"({"type": "object", "properties": {"q": {"type": "string"}},
    "required": ["q"]})",
                                     "search-");
  auto b = json_schema_to_gbnf_rules(R"({"type": "integer"})", "count-");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string g = "root ::= \"<call>\" (search-root | count-root) \"</call>\"\n" + *a + *b;
  auto compiled = grammar_from_gbnf(g);
  ASSERT_TRUE(compiled.ok()) << compiled.message() << "\n" << g;
  grammar_matcher m(*compiled, byte_vocab());
  EXPECT_TRUE(m.accept_bytes(R"(<call>{"q": "x"}</call>)"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(json_schema_to_gbnf_rules("{}", "bad prefix").ok());
}

}  // namespace
}  // namespace hearth
