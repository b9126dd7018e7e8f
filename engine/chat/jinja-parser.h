// Tokens -> statements and expressions, by jinja2's grammar (jinja2/parser.py): its operator
// precedence, filters and tests binding to unary expressions, `a if c else b`, tuples, slices, and
// the statements chat templates use (if, for with `if`/else, set incl. block set and namespace
// attributes, macro, call, filter, with, break/continue, generation).
#pragma once

#include <string_view>
#include <vector>

#include "engine/chat/jinja-ast.h"

namespace hearth::jinja {

// Throws jinja::error "TemplateSyntaxError: ... (line N)". Nesting is bounded (no stack overflow on
// hostile input).
std::vector<stmt_ptr> parse_template(std::string_view source);

}  // namespace hearth::jinja
