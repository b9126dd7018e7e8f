#include "engine/chat/jinja-text.h"

#include "engine/tokenizer/utf8.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace hearth::jinja::text {
namespace {

bool is_py_space(std::string_view cp) {
  if (cp.size() == 1) {
    char c = cp[0];
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
  }
  static constexpr std::string_view spaces[] = {"\u0085", "\u00a0", "\u1680", "\u2000", "\u2001",
                                                "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
                                                "\u2007", "\u2008", "\u2009", "\u200a", "\u2028",
                                                "\u2029", "\u202f", "\u205f", "\u3000"};
  return std::find(std::begin(spaces), std::end(spaces), cp) != std::end(spaces);
}

bool is_line_break(std::string_view cp) {
  if (cp.size() == 1) {
    char c = cp[0];
    return c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= '\x1c' && c <= '\x1e');
  }
  return cp == "\u0085" || cp == "\u2028" || cp == "\u2029";
}

bool ascii_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool ascii_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool ascii_alpha(char c) {
  return ascii_upper(c) || ascii_lower(c);
}
bool ascii_digit(char c) {
  return c >= '0' && c <= '9';
}
char to_up(char c) {
  return ascii_lower(c) ? static_cast<char>(c - 32) : c;
}
char to_low(char c) {
  return ascii_upper(c) ? static_cast<char>(c + 32) : c;
}

std::string join_cps(const std::vector<std::string_view>& cps, size_t b, size_t e) {
  std::string s;
  for (size_t i = b; i < e; ++i) s.append(cps[i]);
  return s;
}

}  // namespace

std::string strip(std::string_view s, const std::string* chars, int side) {
  auto cps = code_points(s);
  std::vector<std::string_view> set;
  if (chars) set = code_points(*chars);
  auto strip_it = [&](std::string_view cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_py_space(cp);
  };
  size_t b = 0, e = cps.size();
  if (side & 1)
    while (b < e && strip_it(cps[b])) ++b;
  if (side & 2)
    while (e > b && strip_it(cps[e - 1])) --e;
  return join_cps(cps, b, e);
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit,
                               bool right) {
  std::vector<std::string> out;
  if (sep) {
    if (!right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t i = s.find(*sep, start);
        if (i == std::string_view::npos) break;
        out.emplace_back(s.substr(start, i - start));
        start = i + sep->size();
      }
      out.emplace_back(s.substr(start));
      return out;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t i = s.rfind(*sep, end - sep->size());
      if (i == std::string_view::npos) break;
      out.emplace_back(s.substr(i + sep->size(), end - i - sep->size()));
      end = i;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  // Whitespace runs separate; none at the ends.
  auto cps = code_points(s);
  if (right) std::reverse(cps.begin(), cps.end());
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && is_py_space(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && is_py_space(cps[e - 1])) --e;
      std::vector<std::string_view> rest(cps.begin() + static_cast<long>(i),
                                         cps.begin() + static_cast<long>(e));
      if (right) std::reverse(rest.begin(), rest.end());
      out.push_back(join_cps(rest, 0, rest.size()));
      break;
    }
    size_t j = i;
    while (j < n && !is_py_space(cps[j])) ++j;
    std::vector<std::string_view> word(cps.begin() + static_cast<long>(i),
                                       cps.begin() + static_cast<long>(j));
    if (right) std::reverse(word.begin(), word.end());
    out.push_back(join_cps(word, 0, word.size()));
    i = j;
  }
  if (right) std::reverse(out.begin(), out.end());
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end.
    auto cps = code_points(s);
    int64_t done = 0;
    for (auto cp : cps) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      out.append(cp);
    }
    if (count < 0 || done < count) out.append(repl);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t i = s.find(old, start);
    if (i == std::string_view::npos) break;
    out.append(s.substr(start, i - start));
    out.append(repl);
    start = i + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

namespace {

uint32_t decode2or3(std::string_view cp) {
  if (cp.size() == 2)
    return ((static_cast<uint32_t>(cp[0]) & 0x1f) << 6) | (static_cast<uint32_t>(cp[1]) & 0x3f);
  return ((static_cast<uint32_t>(cp[0]) & 0x0f) << 12) |
         ((static_cast<uint32_t>(cp[1]) & 0x3f) << 6) | (static_cast<uint32_t>(cp[2]) & 0x3f);
}

// Case of one code point in the alphabets chat messages mostly use beyond ASCII: Latin-1, Latin
// Extended-A, Greek, Cyrillic (Python maps all of Unicode; others stay as they are).
uint32_t case_map(uint32_t c, bool to_upper) {
  if (c < 0x80)
    return to_upper ? static_cast<uint32_t>(to_up(static_cast<char>(c)))
                    : static_cast<uint32_t>(to_low(static_cast<char>(c)));
  if (to_upper) {
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) ||
        (c >= 0x430 && c <= 0x44f))
      return c - 32;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17f) {
      bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
      if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    }
    if (c == 0xff) return 0x178;
    return c;
  }
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) ||
      (c >= 0x410 && c <= 0x42f))
    return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17f) {
    bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
    if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
  }
  if (c == 0x178) return 0xff;
  return c;
}

std::string map_case(std::string_view s, bool to_upper) {
  std::string out;
  out.reserve(s.size());
  for (auto cp : code_points(s)) {
    if (cp.size() == 1) {
      out += to_upper ? to_up(cp[0]) : to_low(cp[0]);
    } else if (cp.size() <= 3 && (static_cast<unsigned char>(cp[1]) & 0xc0) == 0x80) {
      uint32_t c = decode2or3(cp);
      if (to_upper && c == 0xdf)
        out += "SS";
      else
        utf8_append(out, case_map(c, to_upper));
    } else {
      out.append(cp);
    }
  }
  return out;
}

}  // namespace

std::string upper(std::string_view s) {
  return map_case(s, true);
}
std::string lower(std::string_view s) {
  return map_case(s, false);
}
std::string swapcase(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = ascii_upper(c) ? to_low(c) : to_up(c);
  return r;
}
std::string capitalize(std::string_view s) {
  std::string r = lower(s);
  if (!r.empty()) r[0] = to_up(r[0]);
  return r;
}
std::string py_title(std::string_view s) {
  std::string r(s);
  bool prev_cased = false;
  for (char& c : r) {
    if (ascii_alpha(c)) {
      c = prev_cased ? to_low(c) : to_up(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return r;
}
std::string jinja_title(std::string_view s) {
  // Words begin after runs of '-', whitespace, '(', '{', '[', '<'.
  std::string r;
  bool start = true;
  for (auto cp : code_points(s)) {
    bool sep = cp == "-" || cp == "(" || cp == "{" || cp == "[" || cp == "<" || is_py_space(cp);
    if (sep) {
      r.append(cp);
      start = true;
      continue;
    }
    r += cp.size() == 1 ? (start ? to_up(cp[0]) : to_low(cp[0])) : '\0';
    if (cp.size() != 1) {
      r.pop_back();
      r.append(cp);
    }
    start = false;
  }
  return r;
}

size_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return code_points(s).size() + 1;
  size_t n = 0;
  for (size_t i = s.find(sub); i != std::string_view::npos; i = s.find(sub, i + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool right) {
  size_t i = right ? s.rfind(sub) : s.find(sub);
  if (i == std::string_view::npos) return -1;
  return static_cast<int64_t>(code_points(s.substr(0, i)).size());
}

bool is_class(std::string_view s, std::string_view cls) {
  if (s.empty()) return false;
  if (cls == "isupper" || cls == "islower") {
    bool any = false;
    for (char c : s) {
      if (cls == "isupper" ? ascii_lower(c) : ascii_upper(c)) return false;
      any = any || ascii_alpha(c);
    }
    return any;
  }
  for (auto cp : code_points(s)) {
    bool ok;
    if (cls == "isspace")
      ok = is_py_space(cp);
    else if (cp.size() != 1)
      ok = cls == "isalpha" || cls == "isalnum";  // other scripts' letters
    else if (cls == "isdigit" || cls == "isnumeric" || cls == "isdecimal")
      ok = ascii_digit(cp[0]);
    else if (cls == "isalpha")
      ok = ascii_alpha(cp[0]);
    else
      ok = ascii_alpha(cp[0]) || ascii_digit(cp[0]);
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  auto cps = code_points(s);
  std::string cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!is_line_break(cps[i])) {
      cur.append(cps[i]);
      continue;
    }
    std::string brk(cps[i]);
    if (cps[i] == "\r" && i + 1 < cps.size() && cps[i + 1] == "\n") {
      brk += "\n";
      ++i;
    }
    if (keepends) cur += brk;
    out.push_back(std::move(cur));
    cur.clear();
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string pad(std::string_view s, int64_t width, std::string_view fill, std::string_view how) {
  auto n = static_cast<int64_t>(code_points(s).size());
  if (width <= n) return std::string(s);
  int64_t total = width - n;
  auto rep = [&](int64_t k) {
    std::string r;
    for (int64_t i = 0; i < k; ++i) r.append(fill);
    return r;
  };
  if (how == "ljust") return std::string(s) + rep(total);
  if (how == "rjust") return rep(total) + std::string(s);
  if (how == "zfill") {
    if (!s.empty() && (s[0] == '-' || s[0] == '+'))
      return std::string(1, s[0]) + rep(total) + std::string(s.substr(1));
    return rep(total) + std::string(s);
  }
  // center: Python puts the odd space on the right, unless the width's parity says otherwise.
  int64_t left = total / 2 + (total & width & 1);
  return rep(left) + std::string(s) + rep(total - left);
}

size_t word_count(std::string_view s) {
  size_t n = 0;
  bool in_word = false;
  for (char c : s) {
    bool w = ascii_alpha(c) || ascii_digit(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

std::optional<int64_t> parse_int(std::string_view s, int64_t base) {
  std::string t = strip(s, nullptr, 3);
  std::string digits;
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (base == 0) base = 10;
  if (base < 2 || base > 36) return std::nullopt;
  for (; i < t.size(); ++i) {
    if (t[i] == '_' && !digits.empty() && i + 1 < t.size() && t[i + 1] != '_') continue;
    digits += t[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (errno == ERANGE || *end != '\0' || digits[0] == '+' || digits[0] == '-' || digits[0] == ' ')
    return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  std::string t = strip(s, nullptr, 3);
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t.empty() || t.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

namespace {

// format(value, spec) for the spec mini-language's common part: [[fill]align][sign][0][width]
// [,][.precision][type], type one of s d f e g % or none.
std::string format_spec(const value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  auto cps = code_points(spec);
  if (cps.size() >= 2 && cps[1].size() == 1 && is_align(cps[1][0])) {
    fill = std::string(cps[0]);
    align = cps[1][0];
    i = cps[0].size() + 1;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  char sign = 0;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  int64_t width = 0;
  while (i < spec.size() && ascii_digit(spec[i]) && width < 100000)
    width = width * 10 + (spec[i++] - '0');
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && ascii_digit(spec[i]) && precision < 1000)
      precision = precision * 10 + (spec[i++] - '0');
  }
  char type = i < spec.size() ? spec[i++] : 0;
  if (i != spec.size()) fail("ValueError", "Invalid format specifier '" + std::string(spec) + "'");
  std::string body;
  if (v.is_string() && (type == 0 || type == 's')) {
    body = v.str();
    if (precision >= 0) {
      auto c = code_points(body);
      if (c.size() > static_cast<size_t>(precision))
        body = join_cps(c, 0, static_cast<size_t>(precision));
    }
    if (!align) align = '<';
  } else if (v.is_number() && (type == 'd' || (type == 0 && !v.is_float() && precision < 0))) {
    if (type == 'd' && v.is_float())
      fail("ValueError", "Unknown format code 'd' for object of type 'float'");
    int64_t x = v.to_int();
    body = std::to_string(x);
    if (sign == '+' && x >= 0) body = "+" + body;
    if (sign == ' ' && x >= 0) body = " " + body;
    if (!align) align = '>';
  } else if (v.is_number() && (type == 'f' || type == 'F' || type == 'e' || type == 'g' ||
                               type == '%' || type == 0)) {
    double x = v.to_float();
    char b[1200];
    char fmt[16];
    char t = type == 0 ? 'g' : type == '%' ? 'f' : type;
    if (type == '%') x *= 100;
    if (type == 0 && precision < 0) {
      body = float_repr(x);
    } else {
      std::snprintf(fmt, sizeof fmt, "%%%s.%d%c",
                    sign == '+'   ? "+"
                    : sign == ' ' ? " "
                                  : "",
                    precision < 0 ? 6 : precision, t);
      std::snprintf(b, sizeof b, fmt, x);
      body = b;
    }
    if (type == '%') body += "%";
    if (!align) align = '>';
  } else {
    if (type != 0 && type != 's')
      fail("ValueError", "Unknown format code '" + std::string(1, type) + "' for object of type '" +
                             type_name(v) + "'");
    body = to_str(v);
    if (!align) align = '<';
  }
  auto n = static_cast<int64_t>(code_points(body).size());
  if (width <= n) return body;
  int64_t total = width - n;
  auto rep = [&](int64_t k) {
    std::string r;
    for (int64_t j = 0; j < k; ++j) r += fill;
    return r;
  };
  if (align == '<') return body + rep(total);
  if (align == '>') return rep(total) + body;
  if (align == '^') return rep(total / 2) + body + rep(total - total / 2);
  if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    return body.substr(0, 1) + rep(total) + body.substr(1);
  return rep(total) + body;
}

}  // namespace

std::string py_format(std::string_view fmt, const std::vector<value>& args,
                      const kwargs_t& kwargs) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos)
      fail("ValueError", "Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) fail("ValueError", "expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string_view name = field.substr(0, name_end);
    value v;
    if (name.empty() || std::all_of(name.begin(), name.end(), ascii_digit)) {
      size_t idx = name.empty() ? auto_index++
                                : static_cast<size_t>(std::stoul(std::string(name.substr(0, 9))));
      if (idx >= args.size())
        fail("IndexError", "Replacement index " + std::to_string(idx) +
                               " out of range for positional args tuple");
      v = args[idx];
    } else {
      bool found = false;
      for (const auto& [k, x] : kwargs)
        if (k == name) {
          v = x;
          found = true;
        }
      if (!found) fail("KeyError", "'" + std::string(name) + "'");
    }
    // .attr and [key] parts (as the sandbox's formatter, through its getattr).
    while (name_end != std::string_view::npos && name_end < field.size()) {
      if (field[name_end] == '.') {
        size_t e = field.find_first_of(".[", name_end + 1);
        v = get_attribute(
            v, field.substr(name_end + 1, e == std::string_view::npos ? std::string_view::npos
                                                                      : e - name_end - 1));
        name_end = e;
      } else {
        size_t e = field.find(']', name_end);
        if (e == std::string_view::npos) fail("ValueError", "Missing ']' in format string");
        std::string key(field.substr(name_end + 1, e - name_end - 1));
        bool digits =
            !key.empty() && key.size() < 18 && std::all_of(key.begin(), key.end(), ascii_digit);
        v = get_item(v, digits ? value(static_cast<int64_t>(std::stoll(key))) : value(key));
        name_end = e + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a')
      v = value(repr(v));
    else if (conversion == 's')
      v = value(to_str(v));
    else if (conversion)
      fail("ValueError", "Unknown conversion specifier " + std::string(1, conversion));
    out += format_spec(v, spec);
  }
  return out;
}

std::string percent_format(std::string_view fmt, const value& args) {
  std::vector<value> items;
  const value* mapping = args.is_dict() ? &args : nullptr;
  // Python takes a non-tuple with __getitem__ (a dict, a list) as a mapping: no leftover check.
  const bool mapping_like = mapping || (args.is_list() && !args.is_tuple());
  if (args.is_tuple())
    items = args.items();
  else if (!mapping)
    items.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) fail("ValueError", "incomplete format");
    value v;
    bool have = false;
    if (fmt[i] == '(') {
      size_t e = fmt.find(')', i);
      if (e == std::string_view::npos || !mapping) fail("TypeError", "format requires a mapping");
      const value* x = mapping->dict().find(fmt.substr(i + 1, e - i - 1));
      if (!x) fail("KeyError", "'" + std::string(fmt.substr(i + 1, e - i - 1)) + "'");
      v = *x;
      have = true;
      i = e + 1;
    }
    size_t spec_start = i;
    while (i < fmt.size() &&
           std::string_view("-+ #0123456789.").find(fmt[i]) != std::string_view::npos)
      ++i;
    if (i >= fmt.size()) fail("ValueError", "incomplete format");
    char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!have) {
      if (next >= items.size()) fail("TypeError", "not enough arguments for format string");
      v = items[next++];
    }
    std::string flags(fmt.substr(spec_start, i - spec_start));
    if (flags.size() > 16) fail("ValueError", "format specifier too long");
    if (type == 's' || type == 'r' || type == 'a') {
      std::string s = type == 's' ? to_str(v) : repr(v);
      // Width applies to the whole value; pad by hand (printf counts bytes, Python code points).
      int64_t width = 0;
      bool left = flags.find('-') != std::string::npos;
      for (char c : flags) {
        if (c == '.') break;
        if (ascii_digit(c) && width < 100000) width = width * 10 + (c - '0');
      }
      auto n = static_cast<int64_t>(code_points(s).size());
      if (width > n)
        s = left ? s + std::string(static_cast<size_t>(width - n), ' ')
                 : std::string(static_cast<size_t>(width - n), ' ') + s;
      out += s;
    } else if (type == 'd' || type == 'i' || type == 'f' || type == 'F' || type == 'e' ||
               type == 'g' || type == 'x' || type == 'X' || type == 'o') {
      if (!v.is_number())
        fail("TypeError", "%" + std::string(1, type) + " format: a real number is required, not " +
                              type_name(v));
      char b[512];
      if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o')
        std::snprintf(
            b, sizeof b, ("%" + flags + "ll" + std::string(1, type == 'i' ? 'd' : type)).c_str(),
            static_cast<long long>(v.is_float() ? static_cast<int64_t>(v.as_float()) : v.to_int()));
      else
        std::snprintf(b, sizeof b, ("%" + flags + std::string(1, type)).c_str(), v.to_float());
      out += b;
    } else {
      fail("ValueError", "unsupported format character '" + std::string(1, type) + "'");
    }
  }
  if (!mapping_like && next < items.size())
    fail("TypeError", "not all arguments converted during string formatting");
  return out;
}

}  // namespace hearth::jinja::text
