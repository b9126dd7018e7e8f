// Grammars that constrain generation: llama.cpp's GBNF text compiled into a small pushdown
// automaton over bytes, shared read-only by every sequence that generates under it.
//
// GBNF as llama.cpp reads it (grammars/README.md of llama.cpp): rules `name ::= body`, `root`
// the start; alternatives `|`, sequences, groups `( ... )`, repetitions `*` `+` `?` `{m}`
// `{m,}` `{m,n}`, string literals "..." with escapes (\n \r \t \\ \" \[ \] \xHH \uHHHH
// \UHHHHHHHH), character classes [a-z] and [^...], `.` (any character), rule references and `#`
// comments. Names are [a-zA-Z0-9-_]+.
//
// Compilation: every character class (and each character of a literal) becomes one "charset"
// terminal over Unicode code points, which the matcher walks byte by byte through UTF-8 (so a
// token may end inside a character); groups become anonymous rules; a repetition is one element
// with a counter (min, max), never expanded into copies, so x{0,100000} costs what x* costs.
//
// Bounds (hostile text is normal input; each refusal is an error naming what is wrong):
// grammar_max_text bytes of text, grammar_max_rules rules, grammar_max_elements elements,
// grammar_max_nesting nested groups, repetition counts <= grammar_max_repeat, no left recursion
// (a rule that can reach itself without consuming a byte would never stop expanding).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace hearth {

inline constexpr size_t grammar_max_text = 1 << 20;
inline constexpr size_t grammar_max_rules = 1 << 14;
inline constexpr size_t grammar_max_elements = 1 << 18;
inline constexpr size_t grammar_max_nesting = 64;
inline constexpr uint32_t grammar_max_repeat = 1 << 20;
inline constexpr uint32_t grammar_repeat_unbounded = UINT32_MAX;

// One step of a rule's alternative. Alternatives are runs of elements in grammar::elements
// ended by an `end` element.
enum class grammar_op : uint8_t {
  end,      // the alternative is complete: return to the caller
  charset,  // one code point from charsets[a]
  ref,      // rule a
  repeat,   // rule a, at least b and at most c times (c == grammar_repeat_unbounded: no limit)
};

struct grammar_element {
  grammar_op op = grammar_op::end;
  uint32_t a = 0;
  uint32_t b = 0;
  uint32_t c = 0;
};

// Code points as sorted, disjoint, non-adjacent closed ranges, surrogates excluded.
using grammar_charset = std::vector<std::pair<uint32_t, uint32_t>>;

class grammar {
 public:
  struct rule {
    std::string name;            // the GBNF name; "name_N" for a group or repetition body
    std::vector<uint32_t> alts;  // index of each alternative's first element
    bool nullable = false;       // can match the empty string
  };

  const std::vector<rule>& rules() const { return rules_; }
  const std::vector<grammar_element>& elements() const { return elements_; }
  const std::vector<grammar_charset>& charsets() const { return charsets_; }
  uint32_t root() const { return root_; }

 private:
  friend class gbnf_compiler;
  std::vector<rule> rules_;
  std::vector<grammar_element> elements_;
  std::vector<grammar_charset> charsets_;
  uint32_t root_ = 0;
};

// Text as a GBNF string literal ("..." with \" \\ \n \r \t and \xHH for other control bytes),
// for code that writes grammars (json-schema.cpp, the tool-call grammars).
std::string gbnf_quote(std::string_view text);

// GBNF text -> a compiled grammar, or an error naming the line and column and what is wrong
// ("line 3, column 7: undefined rule 'valu'").
result<std::shared_ptr<const grammar>> grammar_from_gbnf(std::string_view gbnf);

}  // namespace hearth
