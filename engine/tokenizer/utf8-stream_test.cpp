#include "engine/tokenizer/utf8-stream.h"

#include <gtest/gtest.h>

namespace hearth {
namespace {

TEST(Utf8Stream, AsciiPassesStraightThrough) {
  utf8_stream s;
  EXPECT_EQ(s.push("Hello"), "Hello");
  EXPECT_EQ(s.push(" world"), " world");
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, HoldsACharacterUntilItIsWhole) {
  utf8_stream s;
  // U+20AC EURO SIGN = E2 82 AC, arriving one byte token at a time.
  EXPECT_EQ(s.push("\xE2"), "");
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, EmitsTheWholePrefixAndKeepsTheTail) {
  utf8_stream s;
  // U+1F999 (4 bytes) split after its second byte.
  EXPECT_EQ(s.push("a\xF0\x9F"), "a");
  EXPECT_EQ(s.push("\xA6\x99 b\xC3"), "\xF0\x9F\xA6\x99 b");
  EXPECT_EQ(s.push("\xBC"), "\xC3\xBC");
}

TEST(Utf8Stream, PassesBytesThatCanNeverStartACharacterAtOnce) {
  utf8_stream s;
  EXPECT_EQ(s.push("\x80"), "\x80");  // stray continuation byte
  EXPECT_EQ(s.push("\xFF"), "\xFF");
  EXPECT_EQ(s.push("\xC0\xAF"), "\xC0\xAF");  // overlong lead, then a stray continuation
  EXPECT_EQ(s.push("x\xF8y"), "x\xF8y");
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Stream, ReleasesALeadByteOnceItsSequenceIsBroken) {
  utf8_stream s;
  EXPECT_EQ(s.push("\xE2\x82"), "");
  // A non-continuation byte proves E2 82 invalid: both go out as they are, then 'A'.
  EXPECT_EQ(s.push("A"),
            "\xE2\x82"
            "A");
  // E0 80 would be an overlong form, ED A0 a UTF-16 surrogate, F4 90 beyond U+10FFFF.
  EXPECT_EQ(s.push("\xE0\x80"), "\xE0\x80");
  EXPECT_EQ(s.push("\xED\xA0"), "\xED\xA0");
  EXPECT_EQ(s.push("\xF4\x90"), "\xF4\x90");
  EXPECT_EQ(s.flush(), "");
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
