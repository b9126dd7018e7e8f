// json_shape_of: RFC 8259's grammar accepted and refused case by case (fuzz/json_shape_fuzz.cpp
// compares it with nlohmann-json on arbitrary bytes), the outline it reports, its bounds.
#include "schema/json-shape.h"

#include <gtest/gtest.h>

#include <string>

namespace hearth::wire {
namespace {

TEST(JsonShape, AcceptsEveryKindOfValue) {
  const std::pair<const char*, json_kind> cases[] = {
      {"null", json_kind::null},
      {" true ", json_kind::boolean},
      {"false", json_kind::boolean},
      {"0", json_kind::number},
      {"-0.5e+10", json_kind::number},
      {"12E3", json_kind::number},
      {"1e-400", json_kind::number},  // underflows to 0, as other parsers read it
      {"123456789012345678901234567890", json_kind::number},
      {R"("a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00")", json_kind::string},
      {"\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", json_kind::string},
      {"[]", json_kind::array},
      {"\t\r\n{ }\n", json_kind::object},
      {R"({"a": [1, {"b": null}], "a": "dup"})", json_kind::object},
  };
  for (const auto& [text, kind] : cases) {
    auto s = json_shape_of(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.message();
    EXPECT_EQ(s->kind, kind) << text;
  }
}

TEST(JsonShape, RefusesWhatIsNotJsonAndSaysWhere) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "expected a value at byte 0"},
      {"   ", "expected a value at byte 3"},
      {"nul", "expected a value at byte 0"},
      {"True", "expected a value at byte 0"},
      {"01", "text after the value at byte 1"},
      {"1.", "expected a digit at byte 2"},
      {".5", "expected a value at byte 0"},
      {"1e", "expected a digit at byte 2"},
      {"+1", "expected a value at byte 0"},
      {"-", "expected a value at byte 1"},
      {"NaN", "expected a value at byte 0"},
      {"[1,]", "expected a value at byte 3"},
      {"[1 2]", "expected ',' or ']' at byte 3"},
      {"{\"a\" 1}", "expected ':' at byte 5"},
      {"{a: 1}", "expected a key at byte 1"},
      {"{\"a\": 1,}", "expected a key at byte 8"},
      {"{\"a\": 1", "expected ',' or '}' at byte 7"},
      {"[", "expected a value at byte 1"},
      {"\"abc", "an unended string at byte 4"},
      {"\"a\tb\"", "a control character in a string at byte 2"},
      {std::string("\"a\0b\"", 5), "a control character in a string at byte 2"},
      {R"("\x")", "an invalid escape at byte 2"},
      {R"("\u12g4")", "expected four hex digits after \\u at byte 5"},
      {R"("\udc00")", "a lone low surrogate at byte 7"},
      {R"("\ud800")", "a high surrogate without its low one at byte 7"},
      {R"("\ud800\u0041")", "a high surrogate without its low one at byte 13"},
      {"\"\xff\"", "invalid UTF-8 at byte 1"},
      {"\"\xc0\xaf\"", "invalid UTF-8 at byte 1"},          // overlong '/'
      {"\"\xe0\x80\xaf\"", "invalid UTF-8 at byte 1"},      // overlong
      {"\"\xed\xa0\x80\"", "invalid UTF-8 at byte 1"},      // a surrogate
      {"\"\xf4\x90\x80\x80\"", "invalid UTF-8 at byte 1"},  // past U+10FFFF
      {"\"\xe2\x82\"", "invalid UTF-8 at byte 1"},          // cut short
      {"\"\xe2\x82", "invalid UTF-8 at byte 1"},
      {"{} {}", "text after the value at byte 3"},
      {"[1, 8e620]", "a number too large for a double at byte 4"},
      {"-1" + std::string(400, '0'), "a number too large for a double at byte 0"},
  };
  for (const auto& [text, why] : cases) {
    auto s = json_shape_of(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message(), why) << text;
  }
}

TEST(JsonShape, OutlinesTheTopLevelMembers) {
  auto tools = json_shape_of(R"([{"type":"function"}, {"a":[1,2,3]}])");
  ASSERT_TRUE(tools.ok());
  EXPECT_EQ(tools->members, 2u);
  EXPECT_TRUE(tools->members_are_objects);
  auto mixed = json_shape_of(R"([{}, [], {}])");
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->members, 3u);
  EXPECT_FALSE(mixed->members_are_objects);
  auto object = json_shape_of(R"({"a": {"b": 1, "c": 2}, "d": []})");
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(object->members, 2u);
}

TEST(JsonShape, NestingIsBounded) {
  const size_t max = json_shape_max_depth;
  std::string ok = std::string(max, '[') + std::string(max, ']');
  EXPECT_TRUE(json_shape_of(ok).ok());
  std::string objects;
  for (size_t i = 0; i < max; ++i) objects += "{\"a\":";
  objects += "1" + std::string(max, '}');
  EXPECT_TRUE(json_shape_of(objects).ok());
  // A million levels: refused at the 65th, without recursing further.
  std::string deep(1 << 20, '[');
  auto s = json_shape_of(deep);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "nested deeper than 64 at byte 64");
}

}  // namespace
}  // namespace hearth::wire
