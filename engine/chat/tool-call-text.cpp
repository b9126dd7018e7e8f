#include "engine/chat/tool-call-text.h"

#include "common/json-nesting.h"

namespace hearth::tool_call_text {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view first_run(std::string_view lit) {
  size_t b = 0;
  while (b < lit.size() && is_space(lit[b])) ++b;
  size_t e = b;
  while (e < lit.size() && !is_space(lit[e])) ++e;
  return lit.substr(b, e - b);
}

match match_literal(std::string_view text, size_t pos, std::string_view lit, bool final,
                    size_t* end) {
  size_t i = 0;
  while (i < lit.size()) {
    if (is_space(lit[i])) {
      while (i < lit.size() && is_space(lit[i])) ++i;
      while (pos < text.size() && is_space(text[pos])) ++pos;
      if (pos == text.size() && !final) return match::more;
      continue;
    }
    if (pos == text.size()) return final ? match::no : match::more;
    if (text[pos] != lit[i]) return match::no;
    ++pos;
    ++i;
  }
  *end = pos;
  return match::ok;
}

match json_span(std::string_view text, size_t pos, bool final, size_t* end) {
  int depth = 0;
  json_string_skip strings;
  for (size_t i = pos; i < text.size(); ++i) {
    if (strings.in_string(text, i)) continue;
    const char c = text[i];
    if (c == '{' || c == '[') {
      if (++depth > max_json_depth) return match::no;
    } else if (c == '}' || c == ']') {
      if (--depth < 0) return match::no;
      if (depth == 0) {
        *end = i + 1;
        return match::ok;
      }
    }
  }
  return final ? match::no : match::more;
}

std::optional<nlohmann::ordered_json> json_parse(std::string_view text) {
  // nlohmann's parser recurses once per level: refuse deep nesting before it sees the text.
  if (json_nesting_depth(text) > size_t(max_json_depth)) return std::nullopt;
  auto v = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!v.is_discarded()) return v;
  // A \u escape of half a surrogate pair is JSON by its grammar (and JavaScript's JSON.parse takes
  // it) but not text nlohmann accepts: such a one becomes U+FFFD, as a lenient reader decodes it.
  std::string fixed(text);
  bool changed = false;
  auto hex_at = [&](size_t i) -> int {
    if (i + 6 > fixed.size() || fixed[i] != '\\' || fixed[i + 1] != 'u') return -1;
    int x = 0;
    for (size_t k = i + 2; k < i + 6; ++k) {
      const char c = fixed[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return -1;
      x = x * 16 + d;
    }
    return x;
  };
  for (size_t i = 0; i + 1 < fixed.size(); ++i) {
    if (fixed[i] != '\\') continue;
    const int x = hex_at(i);
    if (x < 0) {
      ++i;  // another escape: skip its second byte
      continue;
    }
    const int y = hex_at(i + 6);
    if (x >= 0xD800 && x <= 0xDBFF && y >= 0xDC00 && y <= 0xDFFF) {
      i += 11;
    } else if (x >= 0xD800 && x <= 0xDFFF) {
      fixed.replace(i, 6, "\\ufffd");
      changed = true;
      i += 5;
    } else {
      i += 5;
    }
  }
  if (!changed) return std::nullopt;
  v = nlohmann::ordered_json::parse(fixed, nullptr, false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

}  // namespace hearth::tool_call_text
