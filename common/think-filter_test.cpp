#include "common/think-filter.h"

#include <gtest/gtest.h>

#include <vector>

namespace hearth {
namespace {

// The stream cut into `pieces`, pushed one by one, then flushed.
think_filter::split run(const std::vector<std::string>& pieces) {
  think_filter f;
  think_filter::split all;
  for (const auto& p : pieces) {
    auto s = f.push(p);
    all.answer += s.answer;
    all.reasoning += s.reasoning;
  }
  auto s = f.flush();
  all.answer += s.answer;
  all.reasoning += s.reasoning;
  return all;
}

// Every way of cutting `text` in two, and one character at a time, gives the same split.
void expect_split(const std::string& text, const std::string& answer,
                  const std::string& reasoning) {
  SCOPED_TRACE(text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    auto s = run({text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(s.answer, answer) << "cut at " << cut;
    EXPECT_EQ(s.reasoning, reasoning) << "cut at " << cut;
  }
  std::vector<std::string> chars;
  for (char c : text) chars.emplace_back(1, c);
  auto s = run(chars);
  EXPECT_EQ(s.answer, answer);
  EXPECT_EQ(s.reasoning, reasoning);
}

TEST(ThinkFilter, ReasoningIsKeptApartFromTheAnswer) {
  expect_split("<think>\nThe user greets me.\n</think>\n\nHello!", "Hello!",
               "The user greets me.\n");
  expect_split("  <think>a</think>b", "b", "a");
}

TEST(ThinkFilter, AnEmptyThinkBlockLeavesTheAnswer) {
  expect_split("<think>\n\n</think>\n\nHi there", "Hi there", "");
}

TEST(ThinkFilter, WithoutAThinkBlockEverythingIsAnswer) {
  expect_split("Hello <b>world</b>", "Hello <b>world</b>", "");
  expect_split("\n  <thinking> is a word", "\n  <thinking> is a word", "");
  // A tag after the answer began is answer text.
  expect_split("Use <think>...</think> tags", "Use <think>...</think> tags", "");
}

TEST(ThinkFilter, AnUnfinishedBlockIsReasoning) {
  expect_split("<think>\nstill thinking </thi", "", "still thinking </thi");
  expect_split("<thi", "<thi", "");
}

TEST(ThinkFilter, TextIsHeldOnlyWhileItMayBeATag) {
  think_filter f;
  EXPECT_EQ(f.push("<th").answer, "");
  auto s = f.push("ink>\nstep one </");
  EXPECT_TRUE(f.thinking());
  EXPECT_EQ(s.reasoning, "step one ");  // "</" may start "</think>"
  s = f.push("b> two</think>\n\nAn");
  EXPECT_EQ(s.reasoning, "</b> two");
  EXPECT_EQ(s.answer, "An");
  EXPECT_FALSE(f.thinking());
  EXPECT_EQ(f.push("swer").answer, "swer");
  EXPECT_EQ(f.flush().answer, "");
}

}  // namespace
}  // namespace hearth
