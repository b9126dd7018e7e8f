#include "engine/tokenizer/utf8-stream.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace hearth {
namespace {

// Pushes each piece in turn into a fresh stream, expecting what each push releases; then, when
// `flushed` is given, what flush() releases.
void expect_pushes(std::initializer_list<std::pair<std::string_view, std::string_view>> steps,
                   std::optional<std::string_view> flushed) {
  utf8_stream s;
  int step = 0;
  for (const auto& [in, out] : steps) {
    SCOPED_TRACE("push " + std::to_string(step++));
    EXPECT_EQ(s.push(in), out);
  }
  if (flushed) {
    EXPECT_EQ(s.flush(), *flushed);
  }
}

TEST(Utf8Stream, AsciiPassesStraightThrough) {
  expect_pushes({{"Hello", "Hello"}, {" world", " world"}}, "");
}

TEST(Utf8Stream, HoldsACharacterUntilItIsWhole) {
  // U+20AC EURO SIGN = E2 82 AC, arriving one byte token at a time.
  expect_pushes({{"\xE2", ""}, {"\x82", ""}, {"\xAC", "\xE2\x82\xAC"}}, "");
}

TEST(Utf8Stream, EmitsTheWholePrefixAndKeepsTheTail) {
  // U+1F999 (4 bytes) split after its second byte.
  expect_pushes(
      {{"a\xF0\x9F", "a"}, {"\xA6\x99 b\xC3", "\xF0\x9F\xA6\x99 b"}, {"\xBC", "\xC3\xBC"}},
      std::nullopt);
}

TEST(Utf8Stream, PassesBytesThatCanNeverStartACharacterAtOnce) {
  expect_pushes({{"\x80", "\x80"},  // stray continuation byte
                 {"\xFF", "\xFF"},
                 {"\xC0\xAF", "\xC0\xAF"},  // overlong lead, then a stray continuation
                 {"x\xF8y", "x\xF8y"}},
                "");
}

TEST(Utf8Stream, ReleasesALeadByteOnceItsSequenceIsBroken) {
  expect_pushes(
      {{"\xE2\x82", ""},
       // A non-continuation byte proves E2 82 invalid: both go out as they are, then 'A'.
       {"A",
        "\xE2\x82"
        "A"},
       // E0 80 would be an overlong form, ED A0 a UTF-16 surrogate, F4 90 beyond U+10FFFF.
       {"\xE0\x80", "\xE0\x80"},
       {"\xED\xA0", "\xED\xA0"},
       {"\xF4\x90", "\xF4\x90"}},
      "");
}

TEST(Utf8Stream, FlushEndsAnUnfinishedCharacterWithOneReplacementCharacter) {
  utf8_stream s;
  EXPECT_EQ(s.push("ok\xE2\x96"), "ok");
  EXPECT_TRUE(s.holds_back());
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");  // U+FFFD, as llama-server ends such a stream
  EXPECT_FALSE(s.holds_back());
  EXPECT_EQ(s.flush(), "");
  EXPECT_EQ(s.push("\xF0"), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(s.push("\x81"), "\x81");  // the stream starts afresh after a flush
}

}  // namespace
}  // namespace hearth
