#include "engine/grammar/json-schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/json-nesting.h"
#include "engine/grammar/grammar.h"

namespace hearth {

namespace {

// Not `json`: the unity build (asan preset) compiles this file beside others whose `json` is
// nlohmann::json.
using ojson = nlohmann::ordered_json;

constexpr size_t max_nesting = 64;
constexpr size_t max_properties = 4096;
constexpr size_t max_enum = 4096;
// Integers and the whole part of numbers: at most 16 digits, as the number rule writes them.
constexpr int64_t max_magnitude = 9999999999999999;

bool all_of(std::string_view s, char c) {
  return s.find_first_not_of(c) == std::string_view::npos;
}

// Digit strings of one length from lo to hi (same length, lo <= hi), as a GBNF expression.
std::string digits_between(std::string_view lo, std::string_view hi) {
  if (lo.empty()) return "";
  if (lo == hi) return gbnf_quote(lo);
  const size_t rest = lo.size() - 1;
  const auto any_digits = [rest] {
    return rest == 0 ? std::string() : " [0-9]{" + std::to_string(rest) + "}";
  };
  if (lo[0] == hi[0]) {
    return gbnf_quote(lo.substr(0, 1)) + " (" + digits_between(lo.substr(1), hi.substr(1)) + ")";
  }
  std::vector<std::string> alts;
  char mid_lo = lo[0], mid_hi = hi[0];
  if (!all_of(lo.substr(1), '0')) {
    alts.push_back(gbnf_quote(lo.substr(0, 1)) + " (" +
                   digits_between(lo.substr(1), std::string(rest, '9')) + ")");
    ++mid_lo;
  }
  if (!all_of(hi.substr(1), '9')) --mid_hi;
  if (mid_lo <= mid_hi) {
    alts.push_back(std::string("[") + mid_lo + "-" + mid_hi + "]" + any_digits());
  }
  if (!all_of(hi.substr(1), '9')) {
    alts.push_back(gbnf_quote(hi.substr(0, 1)) + " (" +
                   digits_between(std::string(rest, '0'), hi.substr(1)) + ")");
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Non-negative integers in [a, b] written without leading zeros.
std::string uint_between(int64_t a, int64_t b) {
  std::vector<std::string> alts;
  int64_t low = 0, high = 9;  // the numbers of n digits
  for (size_t n = 1; n <= 16 && low <= b; ++n) {
    const int64_t lo = std::max(a, low), hi = std::min(b, high);
    if (lo <= hi)
      alts.push_back("(" + digits_between(std::to_string(lo), std::to_string(hi)) + ")");
    low = n == 1 ? 10 : low * 10;
    high = high * 10 + 9;
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return "(" + out + ")";
}

// Integers in [lo, hi].
std::string int_between(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + uint_between(std::max<int64_t>(1, -hi), -lo));
  if (hi >= 0) alts.push_back(uint_between(std::max<int64_t>(lo, 0), hi));
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return "(" + out + ")";
}

class schema_compiler {
 public:
  schema_compiler(const ojson& root, std::string prefix) : root_(root), p_(std::move(prefix)) {}

  result<std::string> run() {
    reserved_.insert(p_ + "root");  // the schema's own rules are root-1, ...; root names them
    const std::string value = visit(root_, "root", 0, "#");
    if (!err_.empty()) return error{"json schema: " + err_};
    rules_[p_ + "root"] = value;
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  void fail(const std::string& path, const std::string& what) {
    if (err_.empty()) err_ = path + ": " + what;
  }

  // Adds a rule under a name made unique from `hint` and returns that name.
  std::string add_rule(const std::string& hint, const std::string& body) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (base.empty()) base = "r";
    std::string name = p_ + base;
    for (size_t i = 1; (rules_.contains(name) || reserved_.contains(name)); ++i) {
      name = p_ + base + "-" + std::to_string(i);
    }
    rules_[name] = body;
    return name;
  }

  // The shared rules, added on first use.
  std::string prim(const std::string& name) {
    static const std::map<std::string, std::string> bodies = {
        {"space", "| \" \" | \"\\n\" [ \\t]{0,20}"},
        {"boolean", "(\"true\" | \"false\") @space"},
        {"null", "\"null\" @space"},
        {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" @unicode-escape)"},
        // \uXXXX without lone surrogates: a high one (D800-DBFF) only followed by a low one
        // (DC00-DFFF), which never stands alone; strict JSON parsers refuse unpaired ones.
        {"unicode-escape",
         "[0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] "
         "[0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2}"},
        {"string", "\"\\\"\" @char* \"\\\"\" @space"},
        {"integral-part", "[0] | [1-9] [0-9]{0,15}"},
        {"decimal-part", "[0-9]{1,16}"},
        {"number",
         "(\"-\"? @integral-part) (\".\" @decimal-part)? ([eE] [-+]? [0-9]{1,3})? @space"},
        {"integer", "(\"-\"? @integral-part) @space"},
        {"value", "@object | @array | @string | @number | @boolean | @null"},
        {"object",
         "\"{\" @space (@string \":\" @space @value (\",\" @space @string \":\" @space "
         "@value)*)? \"}\" @space"},
        {"array", "\"[\" @space (@value (\",\" @space @value)*)? \"]\" @space"},
        {"date",
         "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | "
         "\"3\" [0-1])"},
        {"time",
         "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" "
         "[0-9]{3})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"},
        {"date-time", "@date \"T\" @time"},
        {"uuid",
         "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
         "[0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}"},
    };
    const std::string full = p_ + name;
    if (!rules_.contains(full)) {
      std::string body = bodies.at(name);
      rules_[full] = "";  // reserved before the rules it uses, which may use it back
      std::string out;
      for (size_t i = 0; i < body.size(); ++i) {
        if (body[i] != '@') {
          out += body[i];
          continue;
        }
        size_t j = i + 1;
        while (j < body.size() &&
               (std::isalnum(static_cast<unsigned char>(body[j])) || body[j] == '-')) {
          ++j;
        }
        out += prim(body.substr(i + 1, j - i - 1));
        i = j - 1;
      }
      rules_[full] = out;
    }
    return full;
  }

  std::string space() { return prim("space"); }

  // A JSON value written exactly (enum, const), then whitespace.
  std::string literal_value(const ojson& v) { return gbnf_quote(dump(v)) + " " + space(); }

  // Compact JSON text; invalid UTF-8 (which the parser lets through nowhere, but a key may
  // still be odd) replaced rather than thrown on.
  static std::string dump(const ojson& v) {
    return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }

  static std::string choice(const std::vector<std::string>& alts) {
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return alts.size() == 1 ? out : "(" + out + ")";
  }

  // A bound of `key` as a count for a repetition (a JSON integer >= 0 within the grammar's limit).
  bool count_of(const ojson& s, const char* key, const std::string& path, uint32_t& out) {
    if (!s.contains(key)) return false;
    const ojson& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>())) {
      fail(path, std::string(key) + " must be a non-negative integer");
      return false;
    }
    if (v.get<double>() > grammar_max_repeat) {
      fail(path, std::string(key) + " " + dump(v) + " is above the grammar's limit " +
                     std::to_string(grammar_max_repeat));
      return false;
    }
    out = v.get<uint32_t>();
    return true;
  }

  // {m,n} text; n == unbounded -> {m,}.
  static std::string repeat_text(uint32_t m, uint32_t n) {
    return "{" + std::to_string(m) + "," +
           (n == grammar_repeat_unbounded ? std::string() : std::to_string(n)) + "}";
  }

  // The bounds of an integer or a number's whole part, rounded inwards; false after fail().
  bool int_bounds(const ojson& s, const std::string& path, int64_t& lo, int64_t& hi) {
    lo = -max_magnitude;
    hi = max_magnitude;
    const auto read = [&](const char* key, bool exclusive, bool is_min) {
      if (!s.contains(key)) return;
      const ojson& v = s[key];
      if (!v.is_number()) return fail(path, std::string(key) + " must be a number");
      const double d = v.get<double>();
      if (!std::isfinite(d)) return fail(path, std::string(key) + " must be finite");
      double b = is_min ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                        : (exclusive ? std::ceil(d) - 1 : std::floor(d));
      b = std::clamp(b, double(-max_magnitude), double(max_magnitude));
      if (is_min) {
        lo = std::max(lo, int64_t(b));
      } else {
        hi = std::min(hi, int64_t(b));
      }
    };
    read("minimum", false, true);
    read("exclusiveMinimum", true, true);
    read("maximum", false, false);
    read("exclusiveMaximum", true, false);
    if (!err_.empty()) return false;
    if (lo > hi) {
      fail(path, "the bounds hold no integer" +
                     std::string(s.contains("type") && s["type"] == "number"
                                     ? " (a number's bounds are rounded inwards to integers)"
                                     : ""));
      return false;
    }
    return true;
  }

  std::string number_rule(const ojson& s, const std::string& path) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") ||
                         s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum");
    if (!bounded) return prim("number");
    int64_t lo, hi;
    if (!int_bounds(s, path, lo, hi)) return "";
    const std::string frac = " \".\" " + prim("decimal-part");
    std::vector<std::string> alts;
    alts.push_back(int_between(lo, hi));  // whole numbers
    // Positive d.f lies in (d, d + 1): d in [max(lo, 0), hi - 1].
    if (std::max<int64_t>(lo, 0) <= hi - 1) {
      alts.push_back(uint_between(std::max<int64_t>(lo, 0), hi - 1) + frac);
    }
    // Negative -d.f lies in (-d - 1, -d): d in [max(-hi, 0), -lo - 1].
    if (std::max<int64_t>(-hi, 0) <= -lo - 1) {
      alts.push_back("\"-\" " + uint_between(std::max<int64_t>(-hi, 0), -lo - 1) + frac);
    }
    return "(" + choice(alts) + ") " + space();
  }

  std::string string_rule(const ojson& s, const std::string& path) {
    if (s.contains("pattern")) {
      fail(path, "pattern is not supported");
      return "";
    }
    const std::string fmt =
        s.contains("format") && s["format"].is_string() ? s["format"].get<std::string>() : "";
    if (fmt == "date" || fmt == "time" || fmt == "date-time" || fmt == "uuid") {
      return "\"\\\"\" " + prim(fmt) + " \"\\\"\" " + space();
    }
    uint32_t m = 0, n = grammar_repeat_unbounded;
    const bool has_min = count_of(s, "minLength", path, m);
    const bool has_max = count_of(s, "maxLength", path, n);
    if (!err_.empty()) return "";
    if (!has_min && !has_max) return prim("string");
    if (n < m) {
      fail(path, "maxLength is below minLength");
      return "";
    }
    return "\"\\\"\" " + prim("char") + repeat_text(m, n) + " \"\\\"\" " + space();
  }

  std::string array_rule(const ojson& s, const std::string& path, size_t depth,
                         const std::string& hint) {
    uint32_t m = 0, n = grammar_repeat_unbounded;
    count_of(s, "minItems", path, m);
    count_of(s, "maxItems", path, n);
    if (!err_.empty()) return "";
    if (n < m) {
      fail(path, "maxItems is below minItems");
      return "";
    }
    const std::string open = "\"[\" " + space(), close = "\"]\" " + space();
    const std::string comma = "\",\" " + space();
    if (s.contains("prefixItems")) {
      const ojson& items = s["prefixItems"];
      if (!items.is_array()) {
        fail(path, "prefixItems must be an array");
        return "";
      }
      std::string body = open;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) body += " " + comma;
        body += " " + visit(items[i], hint + "-" + std::to_string(i), depth + 1,
                            path + "/prefixItems/" + std::to_string(i));
      }
      return body + " " + close;
    }
    const std::string item = s.contains("items")
                                 ? visit(s["items"], hint + "-item", depth + 1, path + "/items")
                                 : prim("value");
    if (n == 0) return open + " " + close;
    const uint32_t rest_max = n == grammar_repeat_unbounded ? n : n - 1;
    const std::string more =
        "(" + comma + " " + item + ")" + repeat_text(m == 0 ? 0 : m - 1, rest_max);
    if (m == 0) return open + " (" + item + " " + more + ")? " + close;
    return open + " " + item + " " + more + " " + close;
  }

  std::string object_rule(const ojson& s, const std::string& path, size_t depth,
                          const std::string& hint) {
    const std::string open = "\"{\" " + space(), close = "\"}\" " + space();
    const std::string comma = "\",\" " + space();
    const ojson props = s.value("properties", ojson::object());
    if (!props.is_object()) {
      fail(path, "properties must be an object");
      return "";
    }
    if (props.size() > max_properties) {
      fail(path, "more than " + std::to_string(max_properties) + " properties");
      return "";
    }
    if (props.empty()) {
      const ojson extra = s.value("additionalProperties", ojson(true));
      if (extra.is_boolean()) return extra.get<bool>() ? prim("object") : open + " " + close;
      // A map: string keys to one schema.
      const std::string v =
          visit(extra, hint + "-value", depth + 1, path + "/additionalProperties");
      const std::string kv = prim("string") + " \":\" " + space() + " " + v;
      return open + " (" + kv + " (" + comma + " " + kv + ")*)? " + close;
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) {
        fail(path, "required must be an array");
        return "";
      }
      for (const ojson& r : s["required"]) {
        if (r.is_string()) required.insert(r.get<std::string>());
      }
    }
    std::vector<std::string> req, opt;
    for (const auto& [key, sub] : props.items()) {
      const std::string v = visit(sub, hint + "-" + key, depth + 1, path + "/properties/" + key);
      if (!err_.empty()) return "";
      const std::string kv =
          add_rule(hint + "-" + key + "-kv",
                   gbnf_quote(dump(ojson(key))) + " " + space() + " \":\" " + space() + " " + v);
      (required.contains(key) ? req : opt).push_back(kv);
    }
    std::string body = open;
    for (size_t i = 0; i < req.size(); ++i) body += (i ? " " + comma + " " : " ") + req[i];
    if (!req.empty()) {
      for (const auto& kv : opt) body += " (" + comma + " " + kv + ")?";
      return body + " " + close;
    }
    // No required property: the first one present has no comma before it. rest_i: the optional
    // properties after the i-th, each with its comma.
    std::vector<std::string> rest(opt.size());
    for (size_t i = opt.size(); i-- > 0;) {
      std::string r =
          i + 1 < opt.size() ? "(" + comma + " " + opt[i + 1] + ")? " + rest[i + 1] : std::string();
      rest[i] = i + 1 < opt.size() ? add_rule(hint + "-rest", r) : "";
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < opt.size(); ++i)
      alts.push_back(opt[i] + (rest[i].empty() ? "" : " " + rest[i]));
    return body + " (" + choice(alts) + ")? " + close;
  }

  std::string ref_rule(const std::string& ref, const std::string& path, size_t depth) {
    if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
    if (ref.empty() || ref[0] != '#') {
      fail(path, "$ref \"" + ref + "\" is not local (only \"#...\" is supported)");
      return "";
    }
    const ojson* target = nullptr;
    try {
      const ojson::json_pointer ptr(ref.substr(1));
      if (root_.contains(ptr)) target = &root_.at(ptr);
    } catch (const std::exception&) {
    }
    if (!target) {
      fail(path, "$ref \"" + ref + "\" points to nothing");
      return "";
    }
    std::string name = ref.size() > 1 ? ref.substr(ref.rfind('/') + 1) : "root-ref";
    name = add_rule("ref-" + name, "");  // reserved: a recursive reference finds it
    refs_[ref] = name;
    const std::string body = visit(*target, name.substr(p_.size()) + "-body", depth + 1, ref);
    rules_[name] = body;
    return name;
  }

  // The schema's GBNF expression (a rule name or a short expression) at `path`.
  std::string visit(const ojson& s, const std::string& hint, size_t depth,
                    const std::string& path) {
    if (!err_.empty()) return "";
    if (depth > max_nesting) {
      fail(path, "nested more than " + std::to_string(max_nesting) + " deep");
      return "";
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema false accepts nothing");
      return prim("value");
    }
    if (!s.is_object()) {
      fail(path, "a schema must be an object or a boolean");
      return "";
    }
    for (const char* k : {"not", "if", "then", "else", "patternProperties", "dependentSchemas"}) {
      if (s.contains(k)) {
        fail(path, std::string(k) + " is not supported");
        return "";
      }
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) {
        fail(path, "$ref must be a string");
        return "";
      }
      return ref_rule(s["$ref"].get<std::string>(), path, depth);
    }
    if (s.contains("const")) return literal_value(s["const"]);
    if (s.contains("enum")) {
      const ojson& e = s["enum"];
      if (!e.is_array() || e.empty() || e.size() > max_enum) {
        fail(path, "enum must be an array of 1 to " + std::to_string(max_enum) + " values");
        return "";
      }
      std::vector<std::string> alts;
      for (const ojson& v : e) alts.push_back(gbnf_quote(dump(v)));
      return "(" + choice(alts) + ") " + space();
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      const ojson& list = s[k];
      if (!list.is_array() || list.empty()) {
        fail(path, std::string(k) + " must be a non-empty array");
        return "";
      }
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        alts.push_back(visit(list[i], hint + "-" + std::to_string(i), depth + 1,
                             path + "/" + k + "/" + std::to_string(i)));
      }
      return add_rule(hint, choice(alts));
    }
    if (s.contains("allOf")) {
      const ojson& list = s["allOf"];
      if (!list.is_array() || list.size() != 1) {
        fail(path, "allOf is supported with one schema only");
        return "";
      }
      return visit(list[0], hint, depth + 1, path + "/allOf/0");
    }
    ojson type = s.value("type", ojson());
    if (type.is_null()) {
      if (s.contains("properties") || s.contains("additionalProperties")) {
        type = "object";
      } else if (s.contains("items") || s.contains("prefixItems")) {
        type = "array";
      } else {
        return prim("value");  // {}: any value
      }
    }
    if (type.is_array()) {
      if (type.empty()) {
        fail(path, "type must not be an empty array");
        return "";
      }
      std::vector<std::string> alts;
      for (const ojson& t : type) {
        ojson one = s;
        one["type"] = t;
        alts.push_back(visit(one, hint, depth + 1, path));
      }
      return add_rule(hint, choice(alts));
    }
    if (!type.is_string()) {
      fail(path, "type must be a string or an array of strings");
      return "";
    }
    const std::string t = type.get<std::string>();
    std::string body;
    if (t == "string") {
      body = string_rule(s, path);
    } else if (t == "integer") {
      int64_t lo, hi;
      const bool bounded = s.contains("minimum") || s.contains("maximum") ||
                           s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum");
      if (!bounded) return prim("integer");
      if (int_bounds(s, path, lo, hi)) body = int_between(lo, hi) + " " + space();
    } else if (t == "number") {
      body = number_rule(s, path);
    } else if (t == "boolean") {
      return prim("boolean");
    } else if (t == "null") {
      return prim("null");
    } else if (t == "object") {
      body = object_rule(s, path, depth, hint);
    } else if (t == "array") {
      body = array_rule(s, path, depth, hint);
    } else {
      fail(path, "unknown type \"" + t + "\"");
    }
    if (!err_.empty()) return "";
    if (body.find(' ') == std::string::npos) return body;  // already one rule's name
    return add_rule(hint, body);
  }

  const ojson& root_;
  std::string p_;
  std::string err_;
  std::map<std::string, std::string> rules_;  // full name -> body
  std::set<std::string> reserved_;
  std::map<std::string, std::string> refs_;  // $ref -> rule name
};

result<ojson> parse_schema(std::string_view text) {
  if (text.size() > grammar_max_text) {
    return error{"json schema: " + std::to_string(text.size()) + " bytes, more than " +
                 std::to_string(grammar_max_text)};
  }
  // Checked before parsing, which recurses once per level.
  if (json_nesting_depth(text) > max_nesting) {
    return error{"json schema: nested more than " + std::to_string(max_nesting) + " deep"};
  }
  ojson j = ojson::parse(text, nullptr, false);
  if (j.is_discarded()) return error{"json schema: not valid JSON"};
  return j;
}

result<std::string> compile(std::string_view schema_json, const std::string& prefix) {
  auto j = parse_schema(schema_json);
  if (!j.ok()) return j.err();
  try {
    return schema_compiler(*j, prefix).run();
  } catch (const std::exception& e) {  // nlohmann's accessors throw on a type we did not expect
    return error{std::string("json schema: ") + e.what()};
  }
}

}  // namespace

result<std::string> json_schema_to_gbnf(std::string_view schema_json) {
  return compile(schema_json, "");
}

result<std::string> json_schema_to_gbnf_rules(std::string_view schema_json,
                                              std::string_view rule_prefix) {
  for (char c : rule_prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
      return error{"json schema: the rule prefix may hold letters, digits and '-' only"};
    }
  }
  return compile(schema_json, std::string(rule_prefix));
}

std::string json_object_gbnf() {
  auto r = compile(R"({"type": "object"})", "");
  return r.ok() ? r.value() : std::string();
}

}  // namespace hearth
