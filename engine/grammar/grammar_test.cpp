// GBNF compilation: each refusal names what is wrong; acceptance and rejection byte by byte
// through the matcher (partial UTF-8 characters, counted repetitions, nullable loops).
#include "engine/grammar/grammar.h"

#include <gtest/gtest.h>

#include "engine/grammar/grammar-matcher.h"

namespace hearth {
namespace {

// A vocabulary of the 256 single bytes: accept_bytes needs no more.
std::shared_ptr<const grammar_vocab> byte_vocab() {
  return grammar_vocab::bytes();
}

std::string compile_error(std::string_view gbnf) {
  auto g = grammar_from_gbnf(gbnf);
  return g.ok() ? std::string("(compiled)") : g.message();
}

// Whether the whole text matches (every byte accepted and the grammar complete at the end).
bool matches(std::string_view gbnf, std::string_view text) {
  auto g = grammar_from_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return false;
  grammar_matcher m(*g, byte_vocab());
  return m.accept_bytes(text) && m.can_end();
}

// Whether the text is a prefix of some match.
bool prefix(std::string_view gbnf, std::string_view text) {
  auto g = grammar_from_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.message();
  if (!g.ok()) return false;
  grammar_matcher m(*g, byte_vocab());
  return m.accept_bytes(text);
}

TEST(grammar, errors_name_what_is_wrong) {
  EXPECT_EQ(compile_error("root ::= valu\n"),
            "grammar: undefined rule 'valu' (first used at line 1, column 10)");
  EXPECT_EQ(compile_error("start ::= \"a\""), "grammar: no rule named 'root'");
  EXPECT_NE(compile_error("root ::= \"abc").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(compile_error("root ::= [abc").find("unterminated character class"), std::string::npos);
  EXPECT_NE(compile_error("root ::= \"\\q\"").find("unknown escape '\\q'"), std::string::npos);
  EXPECT_NE(compile_error("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(compile_error("root ::= \"a\"{0,99999999}").find("repetition count above"),
            std::string::npos);
  EXPECT_NE(compile_error("root ::= * \"a\"").find("'*' follows nothing"), std::string::npos);
  EXPECT_NE(compile_error("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"),
            std::string::npos);
  EXPECT_NE(compile_error("root ::= [z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(compile_error("root ::= \"a\" )").find("unexpected ')'"), std::string::npos);
  EXPECT_NE(compile_error("root = \"a\"").find("expected ::="), std::string::npos);
  EXPECT_EQ(compile_error("root ::= x\nx ::= x \"a\" | \"b\""),
            "grammar: left recursion: rule 'x' can reach itself before matching anything");
  // Through a nullable prefix too.
  EXPECT_NE(compile_error("root ::= x\nx ::= \"a\"? x \"b\" | \"c\"").find("left recursion"),
            std::string::npos);
  EXPECT_NE(compile_error("root ::= " + std::string(70, '(') + "\"a\"" + std::string(70, ')'))
                .find("nested more than"),
            std::string::npos);
  EXPECT_NE(compile_error(std::string(grammar_max_text + 1, ' ')).find("more than"),
            std::string::npos);
  EXPECT_NE(compile_error("root ::= \"\xff\"").find("invalid UTF-8"), std::string::npos);
}

TEST(grammar, literals_alternatives_groups_and_comments) {
  const char* g = R"(# a comment
root ::= greeting " " ( "world" | "there" ) # trailing comment
greeting ::= "hello" | "hi"
)";
  EXPECT_TRUE(matches(g, "hello world"));
  EXPECT_TRUE(matches(g, "hi there"));
  EXPECT_FALSE(matches(g, "hi"));
  EXPECT_TRUE(prefix(g, "hi"));
  EXPECT_FALSE(prefix(g, "hey"));
  EXPECT_FALSE(matches(g, "hello world!"));
  // Rules over several lines inside groups, alternatives after a newline following '|'.
  EXPECT_TRUE(matches("root ::= (\n  \"a\"\n  \"b\"\n) |\n  \"c\"\n", "ab"));
  EXPECT_TRUE(matches("root ::= (\n  \"a\"\n  \"b\"\n) |\n  \"c\"\n", "c"));
  // Escapes.
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\n\t\"\\")", "A\xc3\xa9\n\t\"\\"));
}

TEST(grammar, character_classes_work_on_utf8_byte_by_byte) {
  EXPECT_TRUE(matches("root ::= [a-z]+", "abc"));
  EXPECT_FALSE(matches("root ::= [a-z]+", "abC"));
  EXPECT_TRUE(matches("root ::= [^a]", "\xc3\xa9"));  // é
  EXPECT_FALSE(matches("root ::= [^a]", "a"));
  EXPECT_TRUE(matches("root ::= .", "\xf0\x9f\x98\x80"));  // an emoji, 4 bytes
  EXPECT_TRUE(matches("root ::= [é-ë]", "\xc3\xaa"));
  // A partial character is accepted while some character of the class can complete it.
  EXPECT_TRUE(prefix("root ::= [é]", "\xc3"));
  EXPECT_FALSE(prefix("root ::= [é]", "\xc3\xa8"));
  EXPECT_FALSE(prefix("root ::= [a-z]", "\xc3"));
  EXPECT_FALSE(prefix("root ::= [\\u4e00-\\u9fff]", "\xc3"));  // a 2-byte lead for a 3-byte class
  EXPECT_TRUE(prefix("root ::= [\\u4e00-\\u9fff]", "\xe4"));
  // Invalid UTF-8 never matches, not even `.`: overlong forms, surrogates, stray continuations.
  EXPECT_FALSE(prefix("root ::= .", "\xc0\x80"));
  EXPECT_FALSE(prefix("root ::= .", "\xe0\x80"));
  EXPECT_FALSE(prefix("root ::= .", "\xed\xa0"));
  EXPECT_FALSE(prefix("root ::= .", "\x80"));
  EXPECT_FALSE(prefix("root ::= .", "\xf4\x90"));
}

TEST(grammar, repetitions_count_exactly) {
  const char* g = "root ::= \"a\"{2,4} \"b\"?";
  EXPECT_FALSE(matches(g, "a"));
  EXPECT_TRUE(matches(g, "aa"));
  EXPECT_TRUE(matches(g, "aaaab"));
  EXPECT_FALSE(prefix(g, "aaaaa"));
  EXPECT_TRUE(matches("root ::= (\"ab\"){3}", "ababab"));
  EXPECT_FALSE(matches("root ::= (\"ab\"){3}", "abab"));
  EXPECT_TRUE(matches("root ::= \"x\"{2,} \"y\"", "xxxxxxxxy"));
  EXPECT_FALSE(matches("root ::= \"x\"{2,} \"y\"", "xy"));
  EXPECT_TRUE(matches("root ::= \"abc\"*", ""));
  EXPECT_TRUE(matches("root ::= \"abc\"*", "abcabc"));
  // A nullable body repeated without bound, and with a minimum it meets by empty passes.
  EXPECT_TRUE(matches("root ::= (\"a\"?)* \"b\"", "aab"));
  EXPECT_TRUE(matches("root ::= (\"a\"?){5,6} \"b\"", "ab"));
  EXPECT_FALSE(matches("root ::= (\"a\"?){0,2} \"b\"", "aaab"));
}

TEST(grammar, a_huge_repetition_costs_what_a_small_one_does) {
  // {0,100000} is one counted element: compiling and matching 5000 characters is immediate.
  auto g = grammar_from_gbnf("root ::= [a-z]{0,100000} \"!\"");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_LT((*g)->elements().size(), 10u);
  grammar_matcher m(*g, byte_vocab());
  EXPECT_TRUE(m.accept_bytes(std::string(5000, 'q')));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("!"));
  EXPECT_TRUE(m.can_end());
  auto exact = grammar_from_gbnf("root ::= \"a\"{3000}");
  ASSERT_TRUE(exact.ok());
  grammar_matcher e(*exact, byte_vocab());
  EXPECT_TRUE(e.accept_bytes(std::string(2999, 'a')));
  EXPECT_FALSE(e.can_end());
  EXPECT_TRUE(e.accept_bytes("a"));
  EXPECT_TRUE(e.can_end());
  EXPECT_FALSE(e.accept_bytes("a"));
}

TEST(grammar, recursion_nests) {
  const char* g = "root ::= list\nlist ::= \"[\" (list (\",\" list)*)? \"]\"";
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[[],[[]]]"));
  EXPECT_FALSE(matches(g, "[[]"));
  EXPECT_FALSE(prefix(g, "[]]"));
  // Nesting deeper than the matcher's stack cap is cut off, not crashed on.
  grammar_matcher m(*grammar_from_gbnf(g), byte_vocab());
  EXPECT_FALSE(m.accept_bytes(std::string(5000, '[')));
}

TEST(grammar, matcher_reset_and_tokens) {
  auto g = grammar_from_gbnf("root ::= \"ab\" \"c\"*");
  ASSERT_TRUE(g.ok());
  auto v = grammar_vocab::make({"a", "b", "ab", "abc", "c", "x", "", "ccc"}, {5});
  grammar_matcher m(*g, v);
  EXPECT_TRUE(m.is_allowed(0));
  EXPECT_TRUE(m.is_allowed(2));
  EXPECT_TRUE(m.is_allowed(3));
  EXPECT_FALSE(m.is_allowed(1));
  EXPECT_FALSE(m.is_allowed(5));  // EOG: the grammar cannot end yet
  EXPECT_FALSE(m.is_allowed(6));  // empty piece
  auto mask = m.allowed();
  EXPECT_EQ(mask[0], 0b1101u);
  EXPECT_TRUE(m.accept(3));
  mask = m.allowed();
  EXPECT_EQ(mask[0], (1u << 4) | (1u << 5) | (1u << 7));  // c, ccc, EOG
  EXPECT_TRUE(m.accept(5));
  EXPECT_EQ(m.allowed()[0], 1u << 5);  // only EOG once ended
  m.reset();
  EXPECT_FALSE(m.can_end());
  EXPECT_EQ(m.allowed()[0], 0b1101u);
}

TEST(grammar, quoted_text_matches_itself) {
  std::string text;
  for (int c = 0; c < 128; ++c) text += char(c);
  text += "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";
  EXPECT_TRUE(matches("root ::= " + gbnf_quote(text), text));
  EXPECT_FALSE(matches("root ::= " + gbnf_quote(text), text.substr(1)));
}

}  // namespace
}  // namespace hearth
