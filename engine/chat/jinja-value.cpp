#include "engine/chat/jinja-value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace hearth::jinja {

void fail(std::string_view cls, std::string_view detail) {
  std::string m(cls);
  m += ": ";
  m += detail;
  throw error{std::move(m)};
}

namespace {

uint32_t checked_depth(uint32_t inner) {
  if (inner + 1 > k_max_nesting)
    fail("RecursionError", "lists and dicts nested deeper than " + std::to_string(k_max_nesting));
  return inner + 1;
}

// Printing and comparing recurse through namespaces too, which the nesting count does not see.
thread_local int t_recursion = 0;
struct recursion_guard {
  recursion_guard() {
    if (++t_recursion > 1000) {
      --t_recursion;
      fail("RecursionError", "maximum recursion depth exceeded");
    }
  }
  ~recursion_guard() { --t_recursion; }
  recursion_guard(const recursion_guard&) = delete;
  recursion_guard& operator=(const recursion_guard&) = delete;
};

}  // namespace

value::value(std::vector<value> items, bool tuple) {
  uint32_t inner = 0;
  for (const value& v : items) inner = std::max(inner, v.depth());
  v_ = list_t{std::make_shared<const std::vector<value>>(std::move(items)), tuple,
              checked_depth(inner)};
}

value::value(std::shared_ptr<const dict_data> d) {
  uint32_t inner = 0;
  for (const auto& [k, v] : d->entries) inner = std::max({inner, k.depth(), v.depth()});
  v_ = dict_t{std::move(d), checked_depth(inner)};
}

uint32_t value::depth() const {
  if (is_list()) return std::get<6>(v_).depth;
  if (is_dict()) return std::get<7>(v_).depth;
  return 0;
}

value value::undefined(std::string why, bool security) {
  value v;
  v.v_ = undefined_t{std::make_shared<const std::string>(std::move(why)), security};
  return v;
}

value value::markup(std::string s) {
  value v;
  v.v_ = str_t{std::make_shared<const std::string>(std::move(s)), true};
  return v;
}

int64_t value::to_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  if (is_int()) return as_int();
  double f = as_float();
  if (!std::isfinite(f) || std::fabs(f) >= 9.2e18)
    fail("OverflowError", "cannot convert float to integer");
  return static_cast<int64_t>(f);
}

double value::to_float() const {
  if (is_float()) return as_float();
  return static_cast<double>(to_int());
}

void value::fail_undefined() const {
  const undefined_t& u = undef();
  std::string why = u.why ? *u.why : "value is undefined";
  if (u.security) fail("SecurityError", why);
  fail("UndefinedError", why);
}

const value* dict_data::find(const value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries)
    if (equal(k, key)) return &v;
  return nullptr;
}

const value* dict_data::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void dict_data::set(value key, value v) {
  for (auto& [k, old] : entries)
    if (equal(k, key)) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(std::move(key), std::move(v));
}

value object::attribute(std::string_view name) const {
  return value::undefined("'" + std::string(type_name()) + " object' has no attribute '" +
                          std::string(name) + "'");
}

value object::call(interpreter&, std::vector<value>, std::vector<std::pair<std::string, value>>) {
  fail("TypeError", "'" + std::string(type_name()) + "' object is not callable");
}

std::string object::repr() const {
  return "<" + std::string(type_name()) + " object>";
}

value namespace_object::attribute(std::string_view name) const {
  if (const value* v = attrs.find(name)) return *v;
  return object::attribute(name);
}

std::string namespace_object::repr() const {
  std::string s = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs.entries) {
    if (!first) s += ", ";
    first = false;
    s += jinja::repr(k);
    s += ": ";
    s += jinja::repr(v);
  }
  return s + "}>";
}

std::string type_name(const value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_tuple()) return "tuple";
  if (v.is_list()) return "list";
  if (v.is_dict()) return "dict";
  return std::string(v.obj()->type_name());
}

std::string object_type_repr(const value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

bool truthy(const value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_float()) return v.as_float() != 0.0;
  if (v.is_string()) return !v.str().empty();
  if (v.is_list()) return !v.items().empty();
  if (v.is_dict()) return !v.dict().entries.empty();
  return true;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // The shortest digits that read back as f, laid out as Python's repr: scientific below 1e-4 and
  // from 1e16 on, else positional with at least one decimal.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len)
    return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

// Decodes one code point of UTF-8 (invalid bytes: the byte as is).
uint32_t next_code_point(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (n <= 0 || i + static_cast<size_t>(n) >= s.size()) {
    ++i;
    return c;
  }
  for (int k = 1; k <= n; ++k)
    if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xc0) != 0x80) {
      ++i;
      return c;
    }
  uint32_t cp = c & (0x3f >> n);
  for (int k = 1; k <= n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3f);
  i += static_cast<size_t>(n) + 1;
  return cp;
}

// Python's str.isprintable() for one code point, closely enough for repr: controls, separators
// other than the space, format characters and unassigned private ranges are escaped.
bool printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if ((c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x206f))
    return false;
  if (c == 0x3000 || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) || (c >= 0xd800 && c <= 0xdfff))
    return false;
  if (c >= 0xe000 && c <= 0xf8ff) return false;
  return true;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t c = next_code_point(s, i);
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char b[16];
      if (c < 0x100)
        std::snprintf(b, sizeof b, "\\x%02x", c);
      else if (c < 0x10000)
        std::snprintf(b, sizeof b, "\\u%04x", c);
      else
        std::snprintf(b, sizeof b, "\\U%08x", c);
      out += b;
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out += q;
  return out;
}

void append_repr(std::string& out, const value& v);

void append_sequence(std::string& out, const value& v) {
  const auto& items = v.items();
  out += v.is_tuple() ? '(' : '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i]);
  }
  if (v.is_tuple() && items.size() == 1) out += ',';
  out += v.is_tuple() ? ')' : ']';
}

void append_dict(std::string& out, const value& v) {
  out += '{';
  bool first = true;
  for (const auto& [k, x] : v.dict().entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, x);
  }
  out += '}';
}

void append_repr(std::string& out, const value& v) {
  recursion_guard g;
  if (v.is_string())
    out += string_repr(v.str());
  else if (v.is_undefined())
    out += "Undefined";
  else if (v.is_list())
    append_sequence(out, v);
  else if (v.is_dict())
    append_dict(out, v);
  else
    append_str(out, v);
}

}  // namespace

void append_str(std::string& out, const value& v) {
  recursion_guard g;
  if (v.is_undefined()) return;
  if (v.is_none())
    out += "None";
  else if (v.is_bool())
    out += v.as_bool() ? "True" : "False";
  else if (v.is_int())
    out += std::to_string(v.as_int());
  else if (v.is_float())
    out += float_repr(v.as_float());
  else if (v.is_string())
    out += v.str();
  else if (v.is_list())
    append_sequence(out, v);
  else if (v.is_dict())
    append_dict(out, v);
  else
    out += v.obj()->repr();
}

std::string to_str(const value& v) {
  if (v.is_string()) return v.str();
  std::string s;
  append_str(s, v);
  return s;
}

std::string repr(const value& v) {
  std::string s;
  append_repr(s, v);
  return s;
}

bool equal(const value& a, const value& b) {
  recursion_guard g;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_float() == b.to_float();
    return a.to_int() == b.to_int();
  }
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_list() && b.is_list()) {
    if (a.is_tuple() != b.is_tuple()) return false;
    const auto &x = a.items(), &y = b.items();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equal(x[i], y[i])) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const auto &x = a.dict().entries, &y = b.dict().entries;
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const value* o = b.dict().find(k);
      if (!o || !equal(v, *o)) return false;
    }
    return true;
  }
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_object() && b.is_object()) return a.obj() == b.obj();
  return false;
}

bool less(const value& a, const value& b) {
  recursion_guard g;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.to_float() < b.to_float();
    return a.to_int() < b.to_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  fail("TypeError",
       "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    next_code_point(s, i);
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

size_t length(const value& v) {
  if (v.is_string()) {
    size_t n = 0;
    for (char c : v.str())
      if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
    return n;
  }
  if (v.is_list()) return v.items().size();
  if (v.is_dict()) return v.dict().entries.size();
  if (v.is_undefined()) return 0;
  fail("TypeError", "object of type '" + type_name(v) + "' has no len()");
}

std::vector<value> iterate(const value& v) {
  if (v.is_list()) return v.items();
  if (v.is_undefined()) {
    if (v.undef().security) v.fail_undefined();
    return {};
  }
  std::vector<value> out;
  if (v.is_string()) {
    for (std::string_view c : code_points(v.str())) out.emplace_back(c);
    return out;
  }
  if (v.is_dict()) {
    for (const auto& [k, x] : v.dict().entries) out.push_back(k);
    return out;
  }
  fail("TypeError", "'" + type_name(v) + "' object is not iterable");
}

namespace {

value json_value(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > k_max_nesting)
    fail("RecursionError", "the context nests deeper than " + std::to_string(k_max_nesting));
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return value(none_t{});
    case nlohmann::ordered_json::value_t::boolean:
      return value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return value(static_cast<double>(u));
      return value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(json_value(x, depth + 1));
      return value(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<dict_data>();
      d->entries.reserve(j.size());
      for (const auto& [k, x] : j.items())
        d->entries.emplace_back(value(k), json_value(x, depth + 1));
      return value(std::shared_ptr<const dict_data>(std::move(d)));
    }
    default:
      return value(none_t{});
  }
}

}  // namespace

value from_json(const nlohmann::ordered_json& j) {
  return json_value(j, 0);
}

namespace {

// ensure_ascii: every code point past ASCII as \uXXXX, past the BMP as a surrogate pair.
void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const char ch = s[i];
    auto c = static_cast<unsigned char>(ch);
    if (ensure_ascii && c >= 0x80) {
      uint32_t cp = next_code_point(s, i);
      char b[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", cp);
      }
      out += b;
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// json.dumps turns a non-string key into its JSON text; others are a TypeError.
std::string json_key(const value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return float_repr(k.as_float());
  if (k.is_none()) return "null";
  fail("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
}

void dump(std::string& out, const value& v, const json_format& f, int depth) {
  if (depth > 512)
    fail("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  auto newline = [&](int d) {
    if (!f.indent_set) return;
    out += '\n';
    for (int i = 0; i < d; ++i) out += f.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    double x = v.as_float();
    if (std::isnan(x))
      out += "NaN";
    else if (std::isinf(x))
      out += x > 0 ? "Infinity" : "-Infinity";
    else
      out += float_repr(x);
  } else if (v.is_string()) {
    json_string(out, v.str(), f.ensure_ascii);
  } else if (v.is_list()) {
    const auto& items = v.items();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += f.item_separator;
      newline(depth + 1);
      dump(out, items[i], f, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<std::pair<std::string, const value*>> entries;
    for (const auto& [k, x] : v.dict().entries) entries.emplace_back(json_key(k), &x);
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (f.sort_keys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += f.item_separator;
      newline(depth + 1);
      json_string(out, entries[i].first, f.ensure_ascii);
      out += f.key_separator;
      dump(out, *entries[i].second, f, depth + 1);
    }
    newline(depth);
    out += '}';
  } else {
    fail("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const value& v, const json_format& f) {
  std::string out;
  dump(out, v, f, 0);
  return out;
}

}  // namespace hearth::jinja
