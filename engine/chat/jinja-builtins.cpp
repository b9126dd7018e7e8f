#include "engine/chat/jinja-builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <utility>

#include "engine/chat/jinja-render.h"
#include "engine/chat/jinja-text.h"
#include "engine/chat/jinja.h"

namespace hearth::jinja {
namespace {

// Arguments of a builtin: positional ones after the subject, keyword ones by name.
struct arguments {
  std::vector<value>& pos;
  kwargs_t& kw;
  std::string_view fn;

  bool has(size_t i, std::string_view name) const {
    if (i < pos.size()) return true;
    for (const auto& [k, v] : kw)
      if (k == name) return true;
    return false;
  }
  value get(size_t i, std::string_view name, value def = value()) const {
    if (i < pos.size()) return pos[i];
    for (const auto& [k, v] : kw)
      if (k == name) return v;
    return def;
  }
  void at_most(size_t n) const {
    if (pos.size() > n)
      fail("TypeError", std::string(fn) + "() takes at most " + std::to_string(n) +
                            " argument(s) (" + std::to_string(pos.size()) + " given)");
  }
};

value none() {
  return value(none_t{});
}

const std::string& need_str(const value& v, std::string_view what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string()) fail("TypeError", std::string(what) + " must be str, not " + type_name(v));
  return v.str();
}

int64_t need_int(const value& v, std::string_view what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_int() && !v.is_bool())
    fail("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer (" +
                          std::string(what) + ")");
  return v.to_int();
}

value tuple2(value a, value b) {
  return value(std::vector<value>{std::move(a), std::move(b)}, true);
}

// A builtin callable: a global function, or a method bound to its object.
class function_object : public object {
 public:
  using fn_t = std::function<value(interpreter&, std::vector<value>&, kwargs_t&)>;
  function_object(std::string name, fn_t fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  std::string repr() const override { return "<built-in method " + name_ + ">"; }
  value call(interpreter& in, std::vector<value> args, kwargs_t kwargs) override {
    return fn_(in, args, kwargs);
  }

 private:
  std::string name_;
  fn_t fn_;
};

value make_function(std::string name, function_object::fn_t fn) {
  return value(
      std::shared_ptr<object>(std::make_shared<function_object>(std::move(name), std::move(fn))));
}

value unsafe(std::string_view attr, const value& obj) {
  return value::undefined("access to attribute '" + std::string(attr) + "' of '" + type_name(obj) +
                              "' object is unsafe.",
                          true);
}

value no_attribute(const value& obj, std::string_view name) {
  return value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) +
                          "'");
}

// ---- str methods ----

value str_method(const value& self, std::string_view name) {
  const std::string s = self.str();
  auto bind = [&](function_object::fn_t fn) {
    return make_function(std::string(name), std::move(fn));
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    int side = name == "strip" ? 3 : name == "lstrip" ? 1 : 2;
    return bind([s, side](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "strip"};
      value chars = args.get(0, "chars", none());
      return value(text::strip(s, chars.is_none() ? nullptr : &need_str(chars, "chars"), side));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bind([s, right](interpreter& in, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "split"};
      value sep = args.get(0, "sep", none());
      int64_t max = need_int(args.get(1, "maxsplit", value(int64_t{-1})), "maxsplit");
      if (sep.is_string() && sep.str().empty()) fail("ValueError", "empty separator");
      std::vector<std::string> parts =
          text::split(s, sep.is_none() ? nullptr : &need_str(sep, "sep"), max, right);
      std::vector<value> out;
      out.reserve(parts.size());
      for (auto& p : parts) {
        in.step();
        out.emplace_back(std::move(p));
      }
      return value(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool start = name == "startswith";
    return bind([s, start](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, start ? "startswith" : "endswith"};
      value p = args.get(0, "prefix");
      std::vector<value> options = p.is_tuple() ? p.items() : std::vector<value>{p};
      for (const value& o : options) {
        const std::string& x = need_str(o, start ? "startswith first arg" : "endswith first arg");
        if (start ? s.starts_with(x) : s.ends_with(x)) return value(true);
      }
      return value(false);
    });
  }
  if (name == "replace") {
    return bind([s](interpreter& in, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "replace"};
      int64_t count = need_int(args.get(2, "count", value(int64_t{-1})), "count");
      std::string r = text::replace(s, need_str(args.get(0, "old"), "replace() argument 1"),
                                    need_str(args.get(1, "new"), "replace() argument 2"), count);
      in.check_size(r.size());
      return value(std::move(r));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase" || name == "casefold") {
    std::string n(name);
    return bind([s, n](interpreter&, std::vector<value>&, kwargs_t&) {
      if (n == "upper") return value(text::upper(s));
      if (n == "lower" || n == "casefold") return value(text::lower(s));
      if (n == "title") return value(text::py_title(s));
      if (n == "capitalize") return value(text::capitalize(s));
      return value(text::swapcase(s));
    });
  }
  if (name == "format") {
    return bind([s](interpreter& in, std::vector<value>& a, kwargs_t& k) {
      std::string r = text::py_format(s, a, k);
      in.check_size(r.size());
      return value(std::move(r));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    std::string n(name);
    return bind([s, n](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, n};
      const std::string& sub = need_str(args.get(0, "sub"), n + "() argument");
      if (n == "count") return value(static_cast<int64_t>(text::count(s, sub)));
      bool right = n[0] == 'r';
      int64_t i = text::find(s, sub, right);
      if (i < 0 && (n == "index" || n == "rindex")) fail("ValueError", "substring not found");
      return value(i);
    });
  }
  if (name == "join") {
    return bind([s](interpreter& in, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "join"};
      std::string r;
      bool first = true;
      for (const value& v : iterate(args.get(0, "iterable"))) {
        if (!first) r += s;
        first = false;
        r += need_str(v, "sequence item");
        in.check_size(r.size());
      }
      return value(std::move(r));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower" || name == "isnumeric" || name == "isdecimal") {
    std::string n(name);
    return bind([s, n](interpreter&, std::vector<value>&, kwargs_t&) {
      return value(text::is_class(s, n));
    });
  }
  if (name == "splitlines") {
    return bind([s](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "splitlines"};
      bool keep = truthy(args.get(0, "keepends", value(false)));
      std::vector<value> out;
      for (auto& l : text::splitlines(s, keep)) out.emplace_back(std::move(l));
      return value(std::move(out));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    bool prefix = name == "removeprefix";
    return bind([s, prefix](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "remove"};
      const std::string& x = need_str(args.get(0, "x"), "argument");
      if (prefix && s.starts_with(x)) return value(s.substr(x.size()));
      if (!prefix && s.ends_with(x)) return value(s.substr(0, s.size() - x.size()));
      return value(s);
    });
  }
  if (name == "partition" || name == "rpartition") {
    bool right = name == "rpartition";
    return bind([s, right](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "partition"};
      const std::string& sep = need_str(args.get(0, "sep"), "argument");
      if (sep.empty()) fail("ValueError", "empty separator");
      size_t i = right ? s.rfind(sep) : s.find(sep);
      if (i == std::string::npos)
        return right ? value(std::vector<value>{value(""), value(""), value(s)}, true)
                     : value(std::vector<value>{value(s), value(""), value("")}, true);
      return value(
          std::vector<value>{value(s.substr(0, i)), value(sep), value(s.substr(i + sep.size()))},
          true);
    });
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    std::string n(name);
    return bind([s, n](interpreter& in, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, n};
      int64_t width = need_int(args.get(0, "width"), "width");
      in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
      std::string fill = n == "zfill"              ? "0"
                         : args.has(1, "fillchar") ? need_str(args.get(1, "fillchar"), "fillchar")
                                                   : " ";
      return value(text::pad(s, width, fill, n));
    });
  }
  return no_attribute(self, name);
}

// ---- dict and list methods ----

value dict_method(const value& self, std::string_view name) {
  auto bind = [&](function_object::fn_t fn) {
    return make_function(std::string(name), std::move(fn));
  };
  if (name == "get") {
    return bind([self](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, "get"};
      args.at_most(2);
      const value* v = self.dict().find(args.get(0, "key"));
      return v ? *v : args.get(1, "default", none());
    });
  }
  if (name == "items" || name == "keys" || name == "values") {
    int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
    return bind([self, which](interpreter&, std::vector<value>&, kwargs_t&) {
      std::vector<value> out;
      for (const auto& [k, v] : self.dict().entries)
        out.push_back(which == 0 ? tuple2(k, v) : which == 1 ? k : v);
      return value(std::move(out));
    });
  }
  if (name == "copy") {
    return bind([self](interpreter&, std::vector<value>&, kwargs_t&) {
      return value(std::shared_ptr<const dict_data>(std::make_shared<dict_data>(self.dict())));
    });
  }
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "clear" || name == "fromkeys")
    return unsafe(name, self);
  return value::undefined("");  // not a method: the caller looks the key up
}

value list_method(const value& self, std::string_view name) {
  auto bind = [&](function_object::fn_t fn) {
    return make_function(std::string(name), std::move(fn));
  };
  if (name == "count" || name == "index") {
    bool count = name == "count";
    return bind([self, count](interpreter&, std::vector<value>& a, kwargs_t& k) {
      arguments args{a, k, count ? "count" : "index"};
      value x = args.get(0, "value");
      int64_t n = 0;
      const auto& items = self.items();
      for (size_t i = 0; i < items.size(); ++i)
        if (equal(items[i], x)) {
          if (!count) return value(static_cast<int64_t>(i));
          ++n;
        }
      if (!count) fail("ValueError", repr(x) + " is not in list");
      return value(n);
    });
  }
  if (name == "copy" && !self.is_tuple()) {
    return bind(
        [self](interpreter&, std::vector<value>&, kwargs_t&) { return value(self.items()); });
  }
  if (!self.is_tuple() &&
      (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
       name == "remove" || name == "reverse" || name == "sort" || name == "clear"))
    return unsafe(name, self);
  return no_attribute(self, name);
}

// jinja2's attribute getter of filters (map(attribute='a.b'), sort(attribute=...)): dotted parts,
// integer parts as indexes.
value get_path(const value& v, const value& attribute) {
  if (!attribute.is_string()) return get_item(v, attribute);
  value cur = v;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    cur = digits && part.size() < 18 ? get_item(cur, value(static_cast<int64_t>(std::stoll(part))))
                                     : get_item(cur, value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// The sort key of sort/dictsort/unique/min/max: strings lowercased unless case_sensitive.
value sort_key(const value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return value(text::lower(v.str()));
  return v;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Python's round(x, n) of a float: correctly rounded through its decimal form, ties to even.
double py_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n == 0) return std::nearbyint(x);
  if (n > 20 || n < -20) return n > 0 ? x : 0.0;
  if (n < 0) {
    double p = std::pow(10.0, static_cast<double>(-n));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
  return std::strtod(buf, nullptr);
}

std::vector<value> select_items(interpreter& in, const value& seq, std::vector<value>& args,
                                kwargs_t& kw, bool by_attr, bool keep) {
  std::vector<value> out;
  if (!truthy(seq)) return out;  // jinja2 tests `if seq:` first: None selects nothing
  size_t first = by_attr ? 1 : 0;
  value attr = by_attr ? (args.empty() ? value() : args[0]) : value();
  std::string test = args.size() > first ? need_str(args[first], "test name") : "";
  std::vector<value> test_args(
      args.size() > first + 1 ? args.begin() + static_cast<long>(first) + 1 : args.end(),
      args.end());
  for (const value& item : iterate(seq)) {
    in.step();
    value subject = by_attr ? get_path(item, attr) : item;
    bool r = test.empty() ? truthy(subject) : apply_test(in, test, subject, test_args, kw);
    if (r == keep) out.push_back(item);
  }
  return out;
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
// its first positional argument is ensure_ascii, not jinja2's indent.
value json_filter(const value& v, arguments& args) {
  json_format f;
  f.ensure_ascii = truthy(args.get(0, "ensure_ascii", value(false)));
  value indent = args.get(1, "indent", none());
  if (!indent.is_none()) {
    f.indent_set = true;
    if (indent.is_string())
      f.indent = indent.str();
    else
      f.indent = std::string(
          static_cast<size_t>(std::clamp<int64_t>(need_int(indent, "indent"), 0, 64)), ' ');
    f.item_separator = ",";
  }
  value seps = args.get(2, "separators", none());
  if (!seps.is_none()) {
    std::vector<value> p = iterate(seps);
    if (p.size() != 2) fail("ValueError", "separators must be a pair");
    f.item_separator = need_str(p[0], "separator");
    f.key_separator = need_str(p[1], "separator");
  }
  f.sort_keys = truthy(args.get(3, "sort_keys", value(false)));
  return value(to_json(v, f));
}

}  // namespace

value get_attribute(const value& obj, std::string_view name) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (name.starts_with("__")) return unsafe(name, obj);
  if (obj.is_dict()) {
    value m = dict_method(obj, name);
    if (!m.is_undefined() || m.undef().security) return m;
    if (const value* v = obj.dict().find(name)) return *v;
    return no_attribute(obj, name);
  }
  if (obj.is_string()) return str_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  if (obj.is_object()) return obj.obj()->attribute(name);
  return no_attribute(obj, name);
}

value get_item(const value& obj, const value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_dict()) {
    if (const value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.to_int();
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    } else {
      auto cps = code_points(obj.str());
      auto n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return value(cps[static_cast<size_t>(i)]);
    }
    return value::undefined("'" + object_type_repr(obj) + "' has no element " + repr(key));
  }
  if (key.is_string() && !obj.is_none()) {
    const std::string& k = key.str();
    if (k.starts_with("__")) return unsafe(k, obj);
    if (obj.is_dict()) {
      value m = dict_method(obj, k);
      if (!m.is_undefined() || m.undef().security) return m;
    } else if (obj.is_string() || obj.is_list() || obj.is_object()) {
      return get_attribute(obj, k);
    }
    return no_attribute(obj, k);
  }
  return value::undefined("'" + object_type_repr(obj) + "' has no element " + repr(key));
}

value get_slice(const value& obj, const value& start, const value& stop, const value& step) {
  if (obj.is_undefined()) obj.fail_undefined();
  std::vector<value> items;
  std::vector<std::string_view> cps;
  int64_t n;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.items().size());
  } else if (obj.is_string()) {
    cps = code_points(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else {
    fail("TypeError", "'" + type_name(obj) + "' object is not subscriptable");
  }
  int64_t st = step.is_none() ? 1 : need_int(step, "slice step");
  if (st == 0) fail("ValueError", "slice step cannot be zero");
  auto bound = [&](const value& v, int64_t def) {
    if (v.is_none()) return def;
    int64_t i = need_int(v, "slice index");
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t b = bound(start, st > 0 ? 0 : n - 1);
  int64_t e = bound(stop, st > 0 ? n : -1);
  std::string s;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_list())
      items.push_back(obj.items()[static_cast<size_t>(i)]);
    else
      s.append(cps[static_cast<size_t>(i)]);
  }
  if (obj.is_string()) return value(std::move(s));
  return value(std::move(items), obj.is_tuple());
}

bool contains(const value& container, const value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      fail("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const value& v : container.items())
      if (equal(v, item)) return true;
    return false;
  }
  if (container.is_dict()) {
    if ((item.is_list() && !item.is_tuple()) || item.is_dict())
      fail("TypeError", "unhashable type: '" + type_name(item) + "'");
    return container.dict().find(item) != nullptr;
  }
  if (container.is_undefined()) {
    if (container.undef().security) container.fail_undefined();
    return false;
  }
  fail("TypeError", "argument of type '" + type_name(container) + "' is not iterable");
}

value binary_op(interpreter& in, std::string_view op, const value& a, const value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    append_str(s, b);
    in.check_size(s.size());
    return value(std::move(s));
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  auto unsupported = [&]() -> value {
    fail("TypeError", "unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) +
                          "' and '" + type_name(b) + "'");
  };
  if (a.is_number() && b.is_number()) {
    bool flt = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.to_float() == 0) fail("ZeroDivisionError", "division by zero");
      return value(a.to_float() / b.to_float());
    }
    if (flt) {
      double x = a.to_float(), y = b.to_float();
      if (op == "+") return value(x + y);
      if (op == "-") return value(x - y);
      if (op == "*") return value(x * y);
      if (op == "**") return value(std::pow(x, y));
      if (y == 0) fail("ZeroDivisionError", "float modulo");
      if (op == "//") return value(std::floor(x / y));
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return value(m);
      }
      return unsupported();
    }
    int64_t x = a.to_int(), y = b.to_int(), r = 0;
    auto overflow = [] { fail("OverflowError", "integer result too large"); };
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return value(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return value(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t acc = 1, base = x;
      while (y) {
        if (y & 1 && __builtin_mul_overflow(acc, base, &acc)) overflow();
        y >>= 1;
        if (y && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return value(acc);
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      in.check_size(a.str().size() + b.str().size());
      // Markup + str escapes the str (markupsafe's __add__ / __radd__).
      if (a.is_markup() || b.is_markup())
        return value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                             (b.is_markup() ? b.str() : html_escape(b.str())));
      return value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      in.check_size(items.size());
      return value(std::move(items), a.is_tuple());
    }
    if (a.is_string())
      fail("TypeError", "can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list())
      fail("TypeError", "can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                            "\") to " + type_name(a));
    return unsupported();
  }
  if (op == "*") {
    const value& seq = a.is_number() ? b : a;
    const value& count = a.is_number() ? a : b;
    if ((seq.is_string() || seq.is_list()) && (count.is_int() || count.is_bool())) {
      int64_t n = std::max<int64_t>(count.to_int(), 0);
      if (seq.is_string()) {
        if (n > 0 && seq.str().size() > 0)
          in.check_size(seq.str().size() * static_cast<size_t>(std::min<int64_t>(n, 1 << 30)));
        std::string s;
        for (int64_t i = 0; i < n; ++i) s += seq.str();
        return seq.is_markup() ? value::markup(std::move(s)) : value(std::move(s));
      }
      if (n > 0 && !seq.items().empty())
        in.check_size(seq.items().size() * static_cast<size_t>(std::min<int64_t>(n, 1 << 30)));
      std::vector<value> items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq.items().begin(), seq.items().end());
      return value(std::move(items), seq.is_tuple());
    }
    return unsupported();
  }
  if (op == "%" && a.is_string()) {
    std::string r = text::percent_format(a.str(), b);
    in.check_size(r.size());
    return value(std::move(r));
  }
  return unsupported();
}

value apply_filter(interpreter& in, std::string_view name, const value& v, std::vector<value> pos,
                   kwargs_t kw) {
  arguments args{pos, kw, name};
  if (name == "default" || name == "d") {
    bool boolean = truthy(args.get(1, "boolean", value(false)));
    if (v.is_undefined() || (boolean && !truthy(v))) return args.get(0, "default_value", value(""));
    return v;
  }
  if (name == "length" || name == "count") return value(static_cast<int64_t>(length(v)));
  if (name == "tojson") return json_filter(v, args);
  if (name == "string") return v.is_string() ? v : value(to_str(v));
  if (name == "safe") return v.is_markup() ? v : value::markup(to_str(v));
  if (name == "trim") {
    value chars = args.get(0, "chars", none());
    return value(text::strip(to_str(v), chars.is_none() ? nullptr : &need_str(chars, "chars"), 3));
  }
  if (name == "upper") return value(text::upper(to_str(v)));
  if (name == "lower") return value(text::lower(to_str(v)));
  if (name == "capitalize") return value(text::capitalize(to_str(v)));
  if (name == "title") return value(text::jinja_title(to_str(v)));
  if (name == "replace") {
    value count = args.get(2, "count", none());
    std::string r = text::replace(to_str(v), to_str(args.get(0, "old")), to_str(args.get(1, "new")),
                                  count.is_none() ? -1 : need_int(count, "count"));
    in.check_size(r.size());
    return value(std::move(r));
  }
  if (name == "join") {
    std::string sep = to_str(args.get(0, "d", value("")));
    value attr = args.get(1, "attribute", none());
    std::string r;
    bool first = true;
    for (const value& x : iterate(v)) {
      in.step();
      if (!first) r += sep;
      first = false;
      append_str(r, attr.is_none() ? x : get_path(x, attr));
      in.check_size(r.size());
    }
    return value(std::move(r));
  }
  if (name == "first" || name == "last") {
    std::vector<value> items = iterate(v);
    if (items.empty())
      return value::undefined(std::string("No ") + std::string(name) +
                              " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return value(iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return value(std::vector<value>{});
    if (!v.is_dict())
      fail("AttributeError", "'" + type_name(v) + "' object has no attribute 'items'");
    std::vector<value> out;
    for (const auto& [k, x] : v.dict().entries) out.push_back(tuple2(k, x));
    return value(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict())
      fail("AttributeError", "'" + type_name(v) + "' object has no attribute 'items'");
    bool cs = truthy(args.get(0, "case_sensitive", value(false)));
    std::string by = to_str(args.get(1, "by", value("key")));
    bool reverse = truthy(args.get(2, "reverse", value(false)));
    if (by != "key" && by != "value")
      fail("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    std::vector<value> out;
    for (const auto& [k, x] : v.dict().entries) out.push_back(tuple2(k, x));
    size_t idx = by == "key" ? 0 : 1;
    std::stable_sort(out.begin(), out.end(), [&](const value& a, const value& b) {
      value ka = sort_key(a.items()[idx], cs), kb = sort_key(b.items()[idx], cs);
      return reverse ? less(kb, ka) : less(ka, kb);
    });
    return value(std::move(out));
  }
  if (name == "sort") {
    bool reverse = truthy(args.get(0, "reverse", value(false)));
    bool cs = truthy(args.get(1, "case_sensitive", value(false)));
    value attr = args.get(2, "attribute", none());
    std::vector<value> items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const value& a, const value& b) {
      in.step();
      value ka = sort_key(attr.is_none() ? a : get_path(a, attr), cs);
      value kb = sort_key(attr.is_none() ? b : get_path(b, attr), cs);
      return reverse ? less(kb, ka) : less(ka, kb);
    });
    return value(std::move(items));
  }
  if (name == "unique") {
    bool cs = truthy(args.get(0, "case_sensitive", value(false)));
    value attr = args.get(1, "attribute", none());
    std::vector<value> out, seen;
    for (const value& x : iterate(v)) {
      in.step();
      value key = sort_key(attr.is_none() ? x : get_path(x, attr), cs);
      bool dup = false;
      for (const value& s : seen) dup = dup || equal(s, key);
      if (dup) continue;
      seen.push_back(key);
      out.push_back(x);
    }
    return value(std::move(out));
  }
  if (name == "min" || name == "max") {
    bool cs = truthy(args.get(0, "case_sensitive", value(false)));
    value attr = args.get(1, "attribute", none());
    std::vector<value> items = iterate(v);
    if (items.empty()) return value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
      value a = sort_key(attr.is_none() ? items[i] : get_path(items[i], attr), cs);
      value b = sort_key(attr.is_none() ? items[best] : get_path(items[best], attr), cs);
      if (name == "min" ? less(a, b) : less(b, a)) best = i;
    }
    return items[best];
  }
  if (name == "sum") {
    value attr = args.get(0, "attribute", none());
    value acc = args.get(1, "start", value(int64_t{0}));
    for (const value& x : iterate(v))
      acc = binary_op(in, "+", acc, attr.is_none() ? x : get_path(x, attr));
    return acc;
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto cps = code_points(v.str());
      std::string r;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) r.append(*it);
      return value(std::move(r));
    }
    std::vector<value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return value(std::move(items));
  }
  if (name == "map") {
    std::vector<value> out;
    if (!truthy(v)) return value(std::move(out));  // as jinja2's `if value:`
    value attr = args.get(99, "attribute", value());
    if (!attr.is_undefined()) {
      value def = args.get(99, "default", value());
      for (const value& x : iterate(v)) {
        in.step();
        value r = get_path(x, attr);
        out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
      }
      return value(std::move(out));
    }
    if (pos.empty()) return value(iterate(v));
    std::string filter = need_str(pos[0], "filter name");
    std::vector<value> rest(pos.begin() + 1, pos.end());
    for (const value& x : iterate(v)) {
      in.step();
      out.push_back(apply_filter(in, filter, x, rest, kw));
    }
    return value(std::move(out));
  }
  if (name == "batch") {
    int64_t n = need_int(args.get(0, "linecount"), "linecount");
    if (n <= 0) fail("ValueError", "batch size must be positive");
    value fill = args.get(1, "fill_with", none());
    std::vector<value> out, cur;
    for (const value& x : iterate(v)) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == n) out.emplace_back(std::exchange(cur, {}));
    }
    if (!cur.empty()) {
      if (!fill.is_none())
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
      out.emplace_back(std::move(cur));
    }
    return value(std::move(out));
  }
  if (name == "select" || name == "reject")
    return value(select_items(in, v, pos, kw, false, name == "select"));
  if (name == "selectattr" || name == "rejectattr")
    return value(select_items(in, v, pos, kw, true, name == "selectattr"));
  if (name == "attr") return get_attribute(v, need_str(args.get(0, "name"), "attribute name"));
  if (name == "int") {
    value def = args.get(0, "default", value(int64_t{0}));
    int64_t base = need_int(args.get(1, "base", value(int64_t{10})), "base");
    if (v.is_undefined()) v.fail_undefined();
    if (v.is_number()) return value(v.to_int());
    if (v.is_string()) {
      auto i = text::parse_int(v.str(), base);
      if (i) return value(*i);
      auto f = text::parse_float(v.str());
      if (f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) return value(static_cast<int64_t>(*f));
    }
    return def;
  }
  if (name == "float") {
    value def = args.get(0, "default", value(0.0));
    if (v.is_undefined()) v.fail_undefined();
    if (v.is_number()) return value(v.to_float());
    if (v.is_string())
      if (auto f = text::parse_float(v.str())) return value(*f);
    return def;
  }
  if (name == "abs") {
    if (v.is_float()) return value(std::fabs(v.as_float()));
    if (v.is_number()) {
      int64_t i = v.to_int();
      if (i == INT64_MIN) fail("OverflowError", "integer overflow");
      return value(i < 0 ? -i : i);
    }
    fail("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "round") {
    int64_t precision = need_int(args.get(0, "precision", value(int64_t{0})), "precision");
    std::string method = to_str(args.get(1, "method", value("common")));
    if (!v.is_number())
      fail("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
    if (method == "common") {
      if (!v.is_float()) return value(v.to_int());
      return value(py_round(v.as_float(), precision));
    }
    if (method != "ceil" && method != "floor")
      fail("FilterArgumentError", "method must be common, ceil or floor");
    double p = std::pow(10.0, static_cast<double>(precision));
    double x = v.to_float() * p;
    return value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  }
  if (name == "indent") {
    value width = args.get(0, "width", value(int64_t{4}));
    bool first = truthy(args.get(1, "first", value(false)));
    bool blank = truthy(args.get(2, "blank", value(false)));
    std::string ind =
        width.is_string()
            ? width.str()
            : std::string(
                  static_cast<size_t>(std::clamp<int64_t>(need_int(width, "width"), 0, 1024)), ' ');
    if (!v.is_string())  // jinja2's `s += "\n"`
      fail("TypeError", "unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
    std::string s = v.str() + "\n";
    std::vector<std::string> lines = text::splitlines(s, false);
    std::string r;
    if (blank) {
      for (size_t i = 0; i < lines.size(); ++i) r += (i ? "\n" + ind : "") + lines[i];
    } else {
      r = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i)
        r += "\n" + (lines[i].empty() ? "" : ind) + lines[i];
    }
    if (first) r = ind + r;
    in.check_size(r.size());
    return value(std::move(r));
  }
  if (name == "wordcount") return value(static_cast<int64_t>(text::word_count(to_str(v))));
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (v.is_markup() && name != "forceescape") return v;
    return value::markup(html_escape(to_str(v)));
  }
  if (name == "pprint") return value(repr(v));
  if (name == "format") {
    std::string r = text::percent_format(to_str(v), kw.empty() ? value(pos, true) : value());
    in.check_size(r.size());
    return value(std::move(r));
  }
  if (name == "center") {
    int64_t width = need_int(args.get(0, "width", value(int64_t{80})), "width");
    in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0)));
    return value(text::pad(to_str(v), width, " ", "center"));
  }
  if (name == "truncate") {
    std::string s = to_str(v);
    int64_t len = need_int(args.get(0, "length", value(int64_t{255})), "length");
    bool killwords = truthy(args.get(1, "killwords", value(false)));
    std::string end = to_str(args.get(2, "end", value("...")));
    value leeway_v = args.get(3, "leeway", value(int64_t{5}));
    int64_t leeway = leeway_v.is_none() ? 5 : need_int(leeway_v, "leeway");
    auto cps = code_points(s);
    auto n = static_cast<int64_t>(cps.size());
    if (n <= len + leeway) return value(s);
    int64_t keep = std::max<int64_t>(len - static_cast<int64_t>(length(value(end))), 0);
    std::string head;
    for (int64_t i = 0; i < keep; ++i) head.append(cps[static_cast<size_t>(i)]);
    if (!killwords) {
      size_t sp = head.rfind(' ');
      if (sp != std::string::npos) head.resize(sp);
    }
    return value(head + end);
  }
  fail("TemplateAssertionError", "No filter named '" + std::string(name) + "'.");
}

bool apply_test(interpreter& in, std::string_view name, const value& v, std::vector<value> pos,
                kwargs_t kw) {
  arguments args{pos, kw, name};
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.is_object() && v.obj()->callable();
  if (name == "escaped") return false;
  if (name == "sameas") {
    value o = args.get(0, "other");
    if (v.is_object() && o.is_object()) return v.obj() == o.obj();
    if ((v.is_none() && o.is_none()) || (v.is_bool() && o.is_bool() && v.as_bool() == o.as_bool()))
      return true;
    // CPython keeps one object per small int.
    return v.is_int() && o.is_int() && v.as_int() == o.as_int() && v.as_int() >= -5 &&
           v.as_int() <= 256;
  }
  if (name == "in") return contains(args.get(0, "seq"), v);
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, args.get(0, "other"));
  if (name == "ne" || name == "!=") return !equal(v, args.get(0, "other"));
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, args.get(0, "other"));
  if (name == "le" || name == "<=") return !less(args.get(0, "other"), v);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(args.get(0, "other"), v);
  if (name == "ge" || name == ">=") return !less(v, args.get(0, "other"));
  if (name == "odd" || name == "even") {
    if (v.is_undefined()) v.fail_undefined();
    if (!v.is_int() && !v.is_bool()) fail("TypeError", "odd/even need an integer");
    int64_t r = v.to_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    value n = args.get(0, "num");
    if (v.is_undefined()) v.fail_undefined();
    value m = binary_op(in, "%", v, n);
    return equal(m, value(int64_t{0}));
  }
  if (name == "lower" || name == "upper") {
    // str(value).islower() / .isupper(): cased characters, all of one case.
    return text::is_class(to_str(v), name == "lower" ? "islower" : "isupper");
  }
  if (name == "filter" || name == "test") {
    static const char* filters[] = {
        "default",    "d",          "length", "count",      "tojson",      "string",  "safe",
        "trim",       "upper",      "lower",  "capitalize", "title",       "replace", "join",
        "first",      "last",       "list",   "items",      "dictsort",    "sort",    "unique",
        "min",        "max",        "sum",    "reverse",    "map",         "select",  "reject",
        "selectattr", "rejectattr", "attr",   "int",        "float",       "abs",     "round",
        "indent",     "wordcount",  "escape", "e",          "forceescape", "pprint",  "format",
        "center",     "truncate",   "batch"};
    static const char* tests[] = {
        "defined",     "undefined", "none",   "boolean",     "true",     "false",    "integer",
        "float",       "number",    "string", "mapping",     "iterable", "sequence", "callable",
        "escaped",     "sameas",    "in",     "eq",          "equalto",  "ne",       "lt",
        "lessthan",    "le",        "gt",     "greaterthan", "ge",       "odd",      "even",
        "divisibleby", "lower",     "upper",  "filter",      "test",     "==",       "!=",
        "<",           "<=",        ">",      ">="};
    if (!v.is_string()) return false;
    if (name == "filter")
      return std::any_of(std::begin(filters), std::end(filters),
                         [&](const char* f) { return v.str() == f; });
    return std::any_of(std::begin(tests), std::end(tests),
                       [&](const char* t) { return v.str() == t; });
  }
  fail("TemplateAssertionError", "No test named '" + std::string(name) + "'.");
}

}  // namespace hearth::jinja

namespace hearth {

result<std::chrono::system_clock::time_point> jinja::parse_local_time(std::string_view iso) {
  const std::string text(iso.substr(0, 64));
  std::tm tm{};
  int n = 0;
  if (iso.size() > 32 || std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                                     &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &n) != 5)
    return hearth::error{"a time is YYYY-MM-DDTHH:MM[:SS], not '" + text + "'"};
  size_t rest = static_cast<size_t>(n);
  if (rest < text.size()) {
    int sec = 0, m = 0;
    if (std::sscanf(text.c_str() + rest, ":%2d%n", &sec, &m) != 1 ||
        rest + static_cast<size_t>(m) != text.size())
      return hearth::error{"a time is YYYY-MM-DDTHH:MM[:SS], not '" + text + "'"};
    tm.tm_sec = sec;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1))
    return hearth::error{"'" + text + "' is not a time this machine knows"};
  return std::chrono::system_clock::from_time_t(t);
}

}  // namespace hearth

namespace hearth::jinja {

void add_globals(scope& root) {
  root.vars["range"] =
      make_function("range", [](interpreter& in, std::vector<value>& a, kwargs_t&) {
        if (a.empty() || a.size() > 3) fail("TypeError", "range expected 1 to 3 arguments");
        int64_t start = 0, stop, step = 1;
        if (a.size() == 1) {
          stop = need_int(a[0], "range");
        } else {
          start = need_int(a[0], "range");
          stop = need_int(a[1], "range");
          if (a.size() == 3) step = need_int(a[2], "range");
        }
        if (step == 0) fail("ValueError", "range() arg 3 must not be zero");
        // The sandbox's MAX_RANGE.
        long double count = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                     : (static_cast<long double>(start) - stop - step - 1) / -step;
        if (count > 100000)
          fail("OverflowError",
               "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        std::vector<value> out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
          in.step();
          out.emplace_back(i);
        }
        return value(std::move(out));
      });
  root.vars["namespace"] =
      make_function("namespace", [](interpreter& in, std::vector<value>& a, kwargs_t& k) {
        auto ns = std::make_shared<namespace_object>();
        for (const value& init : a) {
          if (!init.is_dict())
            fail("TypeError", "namespace() takes mappings as positional arguments");
          for (const auto& [key, x] : init.dict().entries) ns->attrs.set(key, x);
        }
        for (auto& [key, x] : k) ns->attrs.set(value(key), x);
        return in.own(ns);
      });
  root.vars["dict"] = make_function("dict", [](interpreter&, std::vector<value>& a, kwargs_t& k) {
    auto d = std::make_shared<dict_data>();
    for (const value& init : a) {
      if (init.is_dict()) {
        for (const auto& [key, x] : init.dict().entries) d->set(key, x);
      } else {
        for (const value& pair : iterate(init)) {
          std::vector<value> kv = iterate(pair);
          if (kv.size() != 2)
            fail("ValueError", "dictionary update sequence element has wrong length");
          d->set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [key, x] : k) d->set(value(key), x);
    return value(std::shared_ptr<const dict_data>(std::move(d)));
  });
  root.vars["raise_exception"] =
      make_function("raise_exception", [](interpreter&, std::vector<value>& a, kwargs_t&) -> value {
        // transformers raises TemplateError(message): the caller sees the template's own words.
        throw error{a.empty() ? std::string() : to_str(a[0])};
      });
  root.vars["strftime_now"] =
      make_function("strftime_now", [](interpreter& in, std::vector<value>& a, kwargs_t&) {
        if (a.empty())
          fail("TypeError", "strftime_now() missing 1 required positional argument: 'format'");
        const std::string& fmt = need_str(a[0], "format");
        if (fmt.size() > 256) fail("ValueError", "strftime_now format too long");
        std::time_t t = std::chrono::system_clock::to_time_t(in.now);
        std::tm tm{};
        localtime_r(&t, &tm);
        std::string out(fmt.size() * 16 + 64, '\0');
        size_t n = fmt.empty() ? 0 : std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
        out.resize(n);
        return value(std::move(out));
      });
}

}  // namespace hearth::jinja
