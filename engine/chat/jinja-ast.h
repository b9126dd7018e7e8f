// The parsed form of a template: expressions and statements as jinja2's parser makes them
// (jinja2/nodes.py), one node struct each for expressions and statements, kinds told apart by enum.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja-value.h"

namespace hearth::jinja {

enum class expr_kind {
  literal,    // value
  name,       // name
  list,       // args
  tuple,      // args
  dict,       // args: key, value, key, value, ...
  attribute,  // args[0].name
  item,       // args[0][args[1]]
  slice,      // args[0][args[1]:args[2]:args[3]] (a missing part is nullptr)
  call,       // args[0](args[1..], kwargs)
  filter,     // args[0] | name(args[1..], kwargs)
  test,       // args[0] is [not] name(args[1..], kwargs)
  unary,      // op args[0]: "not", "-", "+"
  binary,     // args[0] op args[1]: + - * / // % ** ~ == != < <= > >= in "not in" and or
  condition,  // args[1] if args[0] else args[2] (args[2] nullptr: Undefined)
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  expr_kind kind;
  int line = 0;
  value literal;
  std::string name;      // a name, attribute, filter, test or operator
  bool negated = false;  // `is not`
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
};

enum class stmt_kind {
  text,       // text
  output,     // {{ e }}
  if_,        // branches (conditions + bodies), else_body
  for_,       // targets in e [if filter]: body {% else %} else_body
  set,        // targets (or ns_attr of targets[0]) = e
  set_block,  // {% set targets[0] %}body{% endset %} [| filters in e, applied to the name "__body"]
  macro,      // {% macro name(params) %}body
  call_block,    // {% call(params) e %}body: e is a call; the body is `caller`
  filter_block,  // {% filter f %}body: e applies f to the name "__body"
  break_,
  continue_,
  scope,  // body rendered in place ({% generation %}, {% with %} without names)
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;

struct stmt {
  stmt_kind kind;
  int line = 0;
  std::string text;                  // text; the macro's name; set's attribute (ns.attr)
  std::vector<std::string> targets;  // for/set targets
  expr_ptr e;                        // output, iterable, value, call, filters
  expr_ptr filter;                   // for's `if`
  std::vector<std::pair<expr_ptr, std::vector<stmt_ptr>>> branches;  // if/elif
  std::vector<stmt_ptr> body;
  std::vector<stmt_ptr> else_body;
  std::vector<std::pair<std::string, expr_ptr>> params;  // macro/caller parameters, defaults
};

}  // namespace hearth::jinja
