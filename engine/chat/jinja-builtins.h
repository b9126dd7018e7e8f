// What a template can call: jinja2's filters and tests, the globals (range, namespace, dict,
// transformers' raise_exception and strftime_now), Python's methods of str, dict and list, and the
// sandbox's rules for attributes (underscore names and methods that change a list or dict are
// unsafe: SecurityError when used).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/chat/jinja-value.h"

namespace hearth::jinja {

class interpreter;

using kwargs_t = std::vector<std::pair<std::string, value>>;

value apply_filter(interpreter& in, std::string_view name, const value& subject,
                   std::vector<value> args, kwargs_t kwargs);
bool apply_test(interpreter& in, std::string_view name, const value& subject,
                std::vector<value> args, kwargs_t kwargs);

// The sandbox's getattr (`x.name`) and getitem (`x[key]`): a dict's key or method, a str's or
// list's method, an element; an Undefined saying why when there is none.
value get_attribute(const value& obj, std::string_view name);
value get_item(const value& obj, const value& key);
// x[start:stop:step] of a str, list or tuple.
value get_slice(const value& obj, const value& start, const value& stop, const value& step);

// Python's binary operators of the expression language (+ - * / // % ** ~).
value binary_op(interpreter& in, std::string_view op, const value& a, const value& b);
// `a in b`.
bool contains(const value& container, const value& item);

// The template's globals, under the context's variables.
void add_globals(struct scope& root);

}  // namespace hearth::jinja
