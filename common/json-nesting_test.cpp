#include "common/json-nesting.h"

#include <gtest/gtest.h>

#include <string>

namespace hearth {
namespace {

TEST(JsonNesting, CountsArraysAndObjects) {
  EXPECT_EQ(json_nesting_depth(""), 0u);
  EXPECT_EQ(json_nesting_depth("42"), 0u);
  EXPECT_EQ(json_nesting_depth("[]"), 1u);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}], "c": {}})"), 4u);
  EXPECT_EQ(json_nesting_depth(std::string(1000, '[') + std::string(1000, ']')), 1000u);
}

TEST(JsonNesting, SkipsStringsAndTheirEscapes) {
  EXPECT_EQ(json_nesting_depth(R"(["[[[{{{"])"), 1u);
  EXPECT_EQ(json_nesting_depth(R"(["\"[[" , "\\", [2]])"), 2u);
}

TEST(JsonNesting, IgnoresAClosingBracketWithNothingOpen) {
  EXPECT_EQ(json_nesting_depth("]]][["), 2u);
  EXPECT_EQ(json_nesting_depth("[]]["), 1u);
}

TEST(JsonStringSkip, MarksStringsWithTheirQuotesAndEscapes) {
  const std::string_view text = R"(["a\"]", 1])";
  std::string marks;
  json_string_skip strings;
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t at = i;
    const bool in = strings.in_string(text, i);
    marks.append(i - at + 1, in ? 's' : '-');
  }
  EXPECT_EQ(marks, "-ssssss----");
}

}  // namespace
}  // namespace hearth
