// Template text -> tokens, as jinja2's lexer splits it with trim_blocks and lstrip_blocks on:
// text between tags, `{{ }}` and `{% %}` delimiters, and the names, literals and operators inside
// them; comments and `{% raw %}` are resolved here, whitespace control (`-`, `+`) too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::jinja {

enum class token_kind {
  text,
  var_begin,
  var_end,
  block_begin,
  block_end,
  name,
  string,
  integer,
  floating,
  op,  // an operator or bracket: "+", "//", "(", "|", ...
  eof,
};

struct token {
  token_kind kind;
  std::string text;  // the text, name, string literal's value or operator
  int64_t integer = 0;
  double floating = 0;
  int line = 1;
};

// Throws jinja::error "TemplateSyntaxError: ... (line N)" on a malformed template.
std::vector<token> lex(std::string_view source);

}  // namespace hearth::jinja
