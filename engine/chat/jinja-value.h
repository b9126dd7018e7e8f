// The values a Jinja template computes with, behaving as the Python objects jinja2 hands around:
// None/True/False, int, float, str, list, tuple, dict (insertion-ordered), jinja2's Undefined, and
// objects (namespaces, loops, macros, functions, bound methods). Printing follows Python's str()
// and repr() ("None", "True", "['a', 1]", "{'k': 1.0}"), comparison Python's rules (1 == 1.0 ==
// True), so a template renders what jinja2 renders.
//
// Errors inside the engine are thrown as jinja::error and caught at the public API (jinja.h), which
// returns them as result<> values: a template is untrusted input and nothing escapes from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace hearth::jinja {

// An error of the template: `message` is what the caller sees ("TypeError: ...", or the template's
// own raise_exception text as is).
struct error {
  std::string message;
};
[[noreturn]] void fail(std::string_view cls, std::string_view detail);

class value;
class object;
struct dict_data;
class interpreter;

// jinja2's Undefined: empty when printed, false when tested, an error when used otherwise. `why` is
// the message of that error; `security` makes it the sandbox's SecurityError (an unsafe attribute).
struct undefined_t {
  std::shared_ptr<const std::string> why;
  bool security = false;
};
struct none_t {};
struct list_t {
  std::shared_ptr<const std::vector<value>> items;
  bool tuple = false;
  uint32_t depth = 1;  // nesting of lists and dicts in it, itself included
};
struct dict_t {
  std::shared_ptr<const dict_data> d;
  uint32_t depth = 1;
};

// Lists and dicts nest at most this deep (deeper is a RecursionError when made): printing,
// comparing and freeing them recurse.
constexpr uint32_t k_max_nesting = 512;
// A str; `markup` = markupsafe's Markup (from the safe and escape filters), which escapes the
// plain str it is concatenated with, as jinja2 hands it around even without autoescaping.
struct str_t {
  std::shared_ptr<const std::string> s;
  bool markup = false;
};

class value {
 public:
  using storage = std::variant<undefined_t, none_t, bool, int64_t, double, str_t, list_t, dict_t,
                               std::shared_ptr<object>>;
  value() : v_(undefined_t{}) {}
  value(none_t n) : v_(n) {}
  value(bool b) : v_(b) {}
  value(int64_t i) : v_(i) {}
  value(int i) : v_(int64_t{i}) {}
  value(double f) : v_(f) {}
  value(std::string s) : v_(str_t{std::make_shared<const std::string>(std::move(s)), false}) {}
  value(std::string_view s) : value(std::string(s)) {}
  value(const char* s) : value(std::string(s)) {}
  value(std::vector<value> items, bool tuple = false);
  value(std::shared_ptr<const dict_data> d);
  value(std::shared_ptr<object> o) : v_(std::move(o)) {}
  static value undefined(std::string why, bool security = false);
  static value markup(std::string s);

  bool is_undefined() const { return v_.index() == 0; }
  bool is_none() const { return v_.index() == 1; }
  bool is_bool() const { return v_.index() == 2; }
  bool is_int() const { return v_.index() == 3; }  // not bool (Python's bool is an int subclass)
  bool is_float() const { return v_.index() == 4; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return v_.index() == 5; }
  bool is_markup() const { return is_string() && std::get<5>(v_).markup; }
  bool is_list() const { return v_.index() == 6; }  // list or tuple
  bool is_tuple() const { return is_list() && std::get<6>(v_).tuple; }
  bool is_dict() const { return v_.index() == 7; }
  bool is_object() const { return v_.index() == 8; }

  bool as_bool() const { return std::get<2>(v_); }
  int64_t as_int() const { return std::get<3>(v_); }
  double as_float() const { return std::get<4>(v_); }
  const std::string& str() const { return *std::get<5>(v_).s; }
  const std::vector<value>& items() const { return *std::get<6>(v_).items; }
  const dict_data& dict() const { return *std::get<7>(v_).d; }
  const std::shared_ptr<object>& obj() const { return std::get<8>(v_); }
  const undefined_t& undef() const { return std::get<0>(v_); }
  // 1 + the nesting of lists and dicts in it; 0 for a scalar or object.
  uint32_t depth() const;

  // Python's int(x) / float(x) of a number (bool, int or float).
  int64_t to_int() const;
  double to_float() const;

  // Raises this Undefined's error (UndefinedError, or SecurityError for an unsafe attribute).
  [[noreturn]] void fail_undefined() const;

 private:
  storage v_;
};

// A dict: insertion-ordered like Python's, keys compared as Python compares them.
struct dict_data {
  std::vector<std::pair<value, value>> entries;
  const value* find(const value& key) const;
  const value* find(std::string_view key) const;
  // Adds or replaces (dict literals, dict(), namespace attributes).
  void set(value key, value v);
};

// Namespaces, loops, macros and callables: what is not plain data.
class object {
 public:
  virtual ~object() = default;
  // "namespace", "LoopContext", "Macro", "builtin_function_or_method".
  virtual std::string_view type_name() const = 0;
  // Attribute access (`x.name`); an Undefined when there is none.
  virtual value attribute(std::string_view name) const;
  virtual bool callable() const { return false; }
  // Calls it; positional arguments then keyword arguments.
  virtual value call(interpreter& in, std::vector<value> args,
                     std::vector<std::pair<std::string, value>> kwargs);
  virtual std::string repr() const;
  // Drops the values it holds: the renderer calls it on every object it made when a render ends,
  // so reference cycles (a namespace holding itself, a macro in its own scope) are not leaked.
  virtual void release() {}
};

// jinja2's namespace(): the one object a template may change (`{% set ns.x = ... %}`).
class namespace_object : public object {
 public:
  dict_data attrs;
  std::string_view type_name() const override { return "Namespace"; }
  value attribute(std::string_view name) const override;
  std::string repr() const override;
  void release() override { attrs.entries.clear(); }
};

// Python's type name of a value ("str", "int", "dict", "NoneType", "Undefined", ...).
std::string type_name(const value& v);
// jinja2's name of an object in "'dict object' has no attribute 'x'".
std::string object_type_repr(const value& v);

bool truthy(const value& v);
// Python's str(x) and repr(x).
std::string to_str(const value& v);
std::string repr(const value& v);
void append_str(std::string& out, const value& v);
// Python's repr of a float ("1.0", "1e-05", "inf").
std::string float_repr(double f);

// Python's ==, and <; `<` raises TypeError where Python does.
bool equal(const value& a, const value& b);
bool less(const value& a, const value& b);

// Length and iteration as Python's len() and iter() (a str by code points, a dict by keys);
// TypeError for what is neither sized nor iterable.
size_t length(const value& v);
std::vector<value> iterate(const value& v);

// Code-point views of UTF-8 text, for indexing and slicing as Python's str does.
std::vector<std::string_view> code_points(std::string_view s);

// A JSON document as the Python object json.loads makes of it; dict keys keep their order.
value from_json(const nlohmann::ordered_json& j);

// json.dumps(x, ensure_ascii=..., indent=indent, separators=..., sort_keys=...), as
// transformers' tojson filter calls it (ensure_ascii=False unless the template passes True).
// `indent` empty = one line; item and key separators as json.dumps defaults them (", " and ": ",
// or "," and ": " with an indent).
struct json_format {
  bool indent_set = false;
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string to_json(const value& v, const json_format& f);

}  // namespace hearth::jinja
