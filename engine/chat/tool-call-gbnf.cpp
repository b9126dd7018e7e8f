// The grammar of a valid tool call in a derived format (tool-calls.h): what tool_choice
// "required" or a named function constrains generation to.
#include <algorithm>

#include "engine/chat/tool-call-text.h"
#include "engine/chat/tool-calls.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json-schema.h"

namespace hearth {

using nlohmann::ordered_json;
namespace tct = tool_call_text;

namespace {

// A GBNF string literal of `s` after a space (nothing for an empty string: GBNF sequences need
// no element).
std::string lit(std::string_view s) {
  return s.empty() ? "" : " " + gbnf_quote(s);
}

// A character class without the bytes that end a name_params value (the first byte of what
// follows a value) and without whitespace, which the parser trims from a value's ends.
std::string value_char_class(const tool_call_format& f) {
  std::string cls = "[^ \\t\\n\\r";
  for (const std::string* t : {&f.param_next, &f.call_close}) {
    const std::string_view run = tct::first_run(*t);
    if (run.empty()) continue;
    const char c = run[0];
    if (c == ']' || c == '\\' || c == '^' || c == '-' || c == '[') cls += '\\';
    cls += c;
  }
  return cls + "]";
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return tct::is_name_byte(c) && c != '.'; });
}

struct function {
  std::string name;
  ordered_json parameters;
};

result<std::vector<function>> functions_of(std::string_view tools_json, std::string_view choice) {
  auto tools = tct::json_parse(tools_json);
  if (!tools || !tools->is_array()) return error{"tools: not a JSON array"};
  std::vector<function> out;
  for (const auto& t : *tools) {
    auto fn = t.is_object() ? t.find("function") : t.end();
    if (!t.is_object() || fn == t.end() || !fn->is_object())
      return error{"tools: each tool must be {\"type\": \"function\", \"function\": {...}}"};
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || !valid_name(name->get<std::string>()))
      return error{"tools: a function's name must be 1 to 64 letters, digits, '_' or '-'"};
    if (choice != "required" && *name != choice) continue;
    auto params = fn->find("parameters");
    ordered_json p =
        params != fn->end() && params->is_object()
            ? *params
            : ordered_json({{"type", "object"}, {"properties", ordered_json::object()}});
    out.push_back({name->get<std::string>(), std::move(p)});
  }
  if (out.empty()) {
    if (choice == "required") return error{"tool_choice required: no tools"};
    return error{"tool_choice names the function '" + std::string(choice) +
                 "', which tools does not hold"};
  }
  return out;
}

// A non-negative integer keyword of a schema, or `dflt` (a hostile schema's odd value included).
size_t size_keyword(const ordered_json& s, const char* key, size_t dflt) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number_unsigned()) return dflt;
  return size_t(std::min<uint64_t>(it->get<uint64_t>(), 1u << 20));
}

// The rule for one name_params value of schema `s`: a text value for a plain string (the template
// writes strings as they are), one of the literals of a string enum or const, else JSON.
result<std::string> param_value_rule(const tool_call_format& f, const ordered_json& s,
                                     const std::string& prefix, std::string& rules) {
  auto type = s.find("type");
  const bool plain_string = type != s.end() && type->is_string() && *type == "string";
  if (plain_string && s.contains("enum") && s["enum"].is_array()) {
    std::string alt;
    for (const auto& e : s["enum"]) {
      if (!e.is_string() || e.get<std::string>().empty()) continue;
      alt += (alt.empty() ? "" : " |") + lit(e.get<std::string>());
    }
    if (!alt.empty()) return "(" + alt + " )";
  }
  if (plain_string && s.contains("const") && s["const"].is_string())
    return lit(s["const"].get<std::string>());
  if (plain_string && !s.contains("format")) {
    const std::string c = value_char_class(f);
    const size_t min = size_keyword(s, "minLength", 1);
    const size_t max = std::min<size_t>(size_keyword(s, "maxLength", 64), 64);
    if (min > max) return error{"a string parameter's minLength is above its maxLength (or 64)"};
    // Spaces inside, never at either end.
    if (min <= 1)
      return "(" + c + " ((" + c + " | \" \"){0," + std::to_string(max >= 2 ? max - 2 : 0) + "} " +
             c + ")?)";
    return c + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }
  auto r = json_schema_to_gbnf_rules(s.dump(), prefix);
  if (!r) return error{r.message()};
  rules += *r + "\n";
  return " " + prefix + "root";
}

// One call of `fn` (its rules appended to `rules`), `i` its index.
result<std::string> call_rule(const tool_call_format& f, const function& fn, size_t i,
                              std::string& rules) {
  const std::string prefix = "t" + std::to_string(i) + "-";
  auto args = [&]() -> result<std::string> {
    auto r = json_schema_to_gbnf_rules(fn.parameters.dump(), prefix);
    if (!r) return error{"tool " + fn.name + ": " + r.message()};
    rules += *r + "\n";
    return " " + prefix + "root";
  };
  switch (f.shape) {
    case tool_call_shape::json_object:
    case tool_call_shape::json_array: {
      auto a = args();
      if (!a) return a;
      const std::string head =
          f.name_key.empty() ? lit("{" + ordered_json(fn.name).dump() + ": ")
                             : lit("{\"" + f.name_key + "\": " + ordered_json(fn.name).dump() +
                                   ", \"" + f.args_key + "\": ");
      const std::string obj = head + *a + lit("}");
      return f.shape == tool_call_shape::json_array ? obj
                                                    : lit(f.call_open) + obj + lit(f.call_close);
    }
    case tool_call_shape::name_args: {
      auto a = args();
      if (!a) return a;
      std::string s = lit(f.call_open) + lit(fn.name) + lit(f.name_to_args);
      if (f.has_id) s += " [A-Za-z0-9]{9}" + lit(f.args_after_id);
      return s + *a + lit(f.call_close);
    }
    case tool_call_shape::name_params: {
      // The required parameters in the schema's order: arguments that validate.
      std::vector<std::pair<std::string, ordered_json>> params;
      const ordered_json none;
      auto p = fn.parameters.find("properties");
      auto q = fn.parameters.find("required");
      const ordered_json& props = p != fn.parameters.end() ? *p : none;
      const ordered_json& required = q != fn.parameters.end() ? *q : none;
      if (props.is_object() && required.is_array())
        for (auto it = props.begin(); it != props.end(); ++it)
          if (std::find(required.begin(), required.end(), it.key()) != required.end())
            params.emplace_back(it.key(), it.value());
      std::string s = lit(f.call_open) + lit(fn.name);
      if (params.empty()) {
        if (f.name_no_params.empty())
          return error{"tool " + fn.name + ": the template writes no call without arguments"};
        return s + lit(f.name_no_params);
      }
      for (size_t j = 0; j < params.size(); ++j) {
        if (!valid_name(params[j].first))
          return error{"tool " + fn.name + ": parameter names must be letters, digits, '_', '-'"};
        auto v =
            param_value_rule(f, params[j].second, prefix + "p" + std::to_string(j) + "-", rules);
        if (!v) return error{"tool " + fn.name + ": " + v.message()};
        s += lit(j == 0 ? f.param_first : f.param_next) + lit(params[j].first) +
             lit(f.param_key_to_value) + " " + *v;
      }
      return s + lit(f.call_close);
    }
  }
  return error{"unknown tool call shape"};
}

}  // namespace

result<std::string> tool_call_gbnf(const tool_call_format& format, std::string_view tools_json,
                                   std::string_view choice, bool parallel) {
  auto fns = functions_of(tools_json, choice);
  if (!fns) return error{fns.message()};
  std::string rules;
  std::string call = "call ::=";
  for (size_t i = 0; i < fns->size(); ++i) {
    auto c = call_rule(format, (*fns)[i], i, rules);
    if (!c) return error{c.message()};
    call += (i == 0 ? "" : " |") + *c;
  }
  const bool several = parallel && format.parallel_calls;
  std::string root = "root ::=" + lit(format.section_open);
  if (format.shape == tool_call_shape::json_array) {
    root += lit("[") + " call" + (several ? " (" + lit(", ") + " call)*" : "") + lit("]");
  } else {
    root += " call" + (several ? " (" + lit(format.call_sep) + " call)*" : std::string());
  }
  root += lit(format.section_close);
  return root + "\n" + call + "\n" + rules;
}

}  // namespace hearth
