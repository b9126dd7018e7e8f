#include "engine/grammar/grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace hearth {

namespace {

constexpr uint32_t max_code_point = 0x10FFFF;

// Sorted, merged, surrogates removed: the one form every charset has (the matcher's binary
// search and the interning below rely on it).
grammar_charset charset_normalize(grammar_charset r) {
  grammar_charset cut;
  for (auto [lo, hi] : r) {
    if (lo > hi) continue;
    hi = std::min(hi, max_code_point);
    if (lo > max_code_point) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      cut.push_back({lo, 0xD7FF});
      cut.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      cut.push_back({0xE000, hi});
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      cut.push_back({lo, 0xD7FF});
    } else {
      cut.push_back({lo, hi});
    }
  }
  std::sort(cut.begin(), cut.end());
  grammar_charset out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

grammar_charset charset_complement(const grammar_charset& r) {
  grammar_charset out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= max_code_point) out.push_back({next, max_code_point});
  return charset_normalize(std::move(out));
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

}  // namespace

// Recursive descent over the GBNF text, building rules as vectors of alternatives, flattened into
// grammar::elements at the end. Every recursion is bounded by grammar_max_nesting.
class gbnf_compiler {
 public:
  explicit gbnf_compiler(std::string_view text) : s_(text) {}

  result<std::shared_ptr<const grammar>> run() {
    if (s_.size() > grammar_max_text) {
      return error{"grammar: the text is " + std::to_string(s_.size()) + " bytes, more than " +
                   std::to_string(grammar_max_text)};
    }
    skip_space(true);
    while (ok() && p_ < s_.size()) {
      parse_rule();
      skip_space(true);
    }
    if (!ok()) return error{err_};
    for (size_t i = 0; i < rules_.size(); ++i) {
      if (!defined_[i]) {
        return error{"grammar: undefined rule '" + rules_[i].name + "' (first used at " +
                     where(first_use_[i]) + ")"};
      }
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) return error{"grammar: no rule named 'root'"};
    return finish(root->second);
  }

 private:
  using alternative = std::vector<grammar_element>;
  struct pending_rule {
    std::string name;
    std::vector<alternative> alts;
  };

  bool ok() const { return err_.empty(); }

  std::string where(size_t pos) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }

  void fail(const std::string& what) {
    if (ok()) err_ = "grammar: " + where(p_) + ": " + what;
  }

  // Spaces, tabs and comments; newlines too when `newlines` (between rules, inside groups).
  void skip_space(bool newlines) {
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++p_;
      } else if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = p_;
    while (p_ < s_.size() && is_name_char(s_[p_])) ++p_;
    if (p_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, p_ - start));
  }

  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto [it, added] = ids_.try_emplace(name, uint32_t(rules_.size()));
    if (added) {
      if (rules_.size() >= grammar_max_rules) {
        fail("more than " + std::to_string(grammar_max_rules) + " rules");
        return 0;
      }
      rules_.push_back({name, {}});
      defined_.push_back(false);
      first_use_.push_back(used_at);
    }
    return it->second;
  }

  uint32_t anonymous_rule(const std::string& base) {
    return rule_id(base + "_" + std::to_string(rules_.size()), p_);
  }

  void parse_rule() {
    const size_t at = p_;
    const std::string name = parse_name();
    if (!ok()) return;
    skip_space(false);
    if (s_.substr(p_, 3) != "::=") return fail("expected ::= after rule name '" + name + "'");
    p_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name, at);
    if (!ok()) return;
    if (defined_[id]) {
      p_ = at;
      return fail("rule '" + name + "' is defined twice");
    }
    defined_[id] = true;
    auto alts = parse_alternates(name, 0);
    if (!ok()) return;
    rules_[id].alts = std::move(alts);
    if (p_ < s_.size() && s_[p_] != '\n' && s_[p_] != '\r' && !is_name_char(s_[p_])) {
      fail(std::string("unexpected '") + s_[p_] + "' at the end of rule '" + name + "'");
    }
  }

  std::vector<alternative> parse_alternates(const std::string& name, size_t depth) {
    std::vector<alternative> alts;
    alts.push_back(parse_sequence(name, depth));
    while (ok() && p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      skip_space(true);
      alts.push_back(parse_sequence(name, depth));
    }
    return alts;
  }

  void count_elements(size_t n) {
    n_elements_ += n;
    if (n_elements_ > grammar_max_elements) {
      fail("more than " + std::to_string(grammar_max_elements) + " elements");
    }
  }

  alternative parse_sequence(const std::string& name, size_t depth) {
    alternative seq;
    size_t last_start = SIZE_MAX;  // where the last symbol's elements start, for a repetition
    while (ok() && p_ < s_.size()) {
      const char c = s_[p_];
      const size_t before = seq.size();
      if (c == '"') {
        ++p_;
        while (ok() && p_ < s_.size() && s_[p_] != '"') {
          const uint32_t cp = parse_char();
          if (ok()) seq.push_back({grammar_op::charset, intern_charset({{cp, cp}})});
        }
        if (p_ >= s_.size()) return fail("unterminated string literal"), seq;
        ++p_;
      } else if (c == '[') {
        ++p_;
        bool negated = false;
        if (p_ < s_.size() && s_[p_] == '^') {
          negated = true;
          ++p_;
        }
        grammar_charset set;
        while (ok() && p_ < s_.size() && s_[p_] != ']') {
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
            ++p_;
            hi = parse_char();
            if (ok() && hi < lo) fail("character range is backwards");
          }
          set.push_back({lo, hi});
        }
        if (p_ >= s_.size()) return fail("unterminated character class"), seq;
        ++p_;
        set = charset_normalize(std::move(set));
        if (negated) set = charset_complement(set);
        if (ok()) seq.push_back({grammar_op::charset, intern_charset(std::move(set))});
      } else if (c == '.') {
        ++p_;
        seq.push_back({grammar_op::charset, intern_charset({{0, max_code_point}})});
      } else if (is_name_char(c)) {
        const size_t at = p_;
        const std::string ref = parse_name();
        skip_space(false);
        if (s_.substr(p_, 3) == "::=") {
          p_ = at;  // the next rule starts here (a rule may end without a newline before it)
          break;
        }
        seq.push_back({grammar_op::ref, rule_id(ref, at)});
      } else if (c == '(') {
        if (depth + 1 >= grammar_max_nesting) {
          return fail("groups nested more than " + std::to_string(grammar_max_nesting) + " deep"),
                 seq;
        }
        ++p_;
        skip_space(true);
        const uint32_t id = anonymous_rule(name);
        auto alts = parse_alternates(name, depth + 1);
        if (!ok()) return seq;
        if (p_ >= s_.size() || s_[p_] != ')') return fail("expected ')'"), seq;
        ++p_;
        defined_[id] = true;
        rules_[id].alts = std::move(alts);
        seq.push_back({grammar_op::ref, id});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_start == SIZE_MAX) return fail(std::string("'") + c + "' follows nothing"), seq;
        uint32_t min = 0, max = grammar_repeat_unbounded;
        ++p_;
        if (c == '+') min = 1;
        if (c == '?') max = 1;
        if (c == '{') {
          skip_space(false);
          min = parse_count();
          skip_space(false);
          max = min;
          if (ok() && p_ < s_.size() && s_[p_] == ',') {
            ++p_;
            skip_space(false);
            max = p_ < s_.size() && s_[p_] == '}' ? grammar_repeat_unbounded : parse_count();
            skip_space(false);
          }
          if (ok() && (p_ >= s_.size() || s_[p_] != '}')) fail("expected '}'");
          ++p_;
          if (ok() && max < min) fail("repetition {m,n} with n < m");
        }
        if (!ok()) return seq;
        seq.push_back(repeat_of(name, seq, last_start, min, max));
        last_start = SIZE_MAX;  // x** is an error, as in llama.cpp
        skip_space(depth > 0);
        continue;
      } else {
        break;
      }
      last_start = before;
      skip_space(depth > 0);
    }
    count_elements(seq.size() + 1);
    return seq;
  }

  // The elements [start, end) of seq become one repeated element.
  grammar_element repeat_of(const std::string& name, alternative& seq, size_t start, uint32_t min,
                            uint32_t max) {
    uint32_t body;
    if (seq.size() - start == 1 && seq[start].op == grammar_op::ref) {
      body = seq[start].a;
    } else {
      body = anonymous_rule(name);
      defined_[body] = true;
      rules_[body].alts.push_back(alternative(seq.begin() + long(start), seq.end()));
    }
    seq.resize(start);
    return {grammar_op::repeat, body, min, max};
  }

  uint32_t parse_count() {
    const size_t start = p_;
    uint64_t v = 0;
    while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9' && v <= grammar_max_repeat) {
      v = v * 10 + uint64_t(s_[p_++] - '0');
    }
    if (p_ == start) fail("expected a repetition count");
    if (v > grammar_max_repeat) {
      fail("repetition count above " + std::to_string(grammar_max_repeat));
    }
    return uint32_t(v);
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i, ++p_) {
      const char c = p_ < s_.size() ? s_[p_] : 0;
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = uint32_t(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = uint32_t(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = uint32_t(c - 'A' + 10);
      } else {
        fail("expected " + std::to_string(digits) + " hex digits");
        return 0;
      }
      v = v * 16 + d;
    }
    if (v > max_code_point) fail("code point above U+10FFFF");
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  uint32_t parse_char() {
    const auto b = static_cast<unsigned char>(s_[p_]);
    if (b == '\\') {
      ++p_;
      if (p_ >= s_.size()) return fail("escape at the end of the text"), 0;
      const char e = s_[p_++];
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
          return uint32_t(e);
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        default:
          --p_;
          return fail(std::string("unknown escape '\\") + e + "'"), 0;
      }
    }
    if (b < 0x80) {
      if (b == '\n' || b == '\r') return fail("newline inside a literal or class"), 0;
      ++p_;
      return b;
    }
    const size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || b > 0xF4 || p_ + len > s_.size()) return fail("invalid UTF-8"), 0;
    uint32_t cp = b & (0x7F >> len);
    for (size_t i = 1; i < len; ++i) {
      const auto c = static_cast<unsigned char>(s_[p_ + i]);
      if ((c & 0xC0) != 0x80) return fail("invalid UTF-8"), 0;
      cp = cp << 6 | (c & 0x3F);
    }
    p_ += len;
    return cp;
  }

  uint32_t intern_charset(grammar_charset set) {
    set = charset_normalize(std::move(set));  // `.` and literals too: no surrogates
    auto [it, added] = charset_ids_.try_emplace(set, uint32_t(charsets_.size()));
    if (added) charsets_.push_back(std::move(set));
    return it->second;
  }

  result<std::shared_ptr<const grammar>> finish(uint32_t root) {
    auto g = std::make_shared<grammar>();
    g->root_ = root;
    g->charsets_ = std::move(charsets_);
    for (auto& r : rules_) {
      grammar::rule out{r.name, {}, false};
      for (auto& alt : r.alts) {
        out.alts.push_back(uint32_t(g->elements_.size()));
        g->elements_.insert(g->elements_.end(), alt.begin(), alt.end());
        g->elements_.push_back({grammar_op::end});
      }
      g->rules_.push_back(std::move(out));
    }
    mark_nullable(*g);
    if (auto e = check_left_recursion(*g); !e.ok()) return e.err();
    return std::shared_ptr<const grammar>(std::move(g));
  }

  static bool element_nullable(const grammar& g, const grammar_element& e) {
    switch (e.op) {
      case grammar_op::charset:
        return false;
      case grammar_op::ref:
        return g.rules_[e.a].nullable;
      case grammar_op::repeat:
        return e.b == 0 || g.rules_[e.a].nullable;
      case grammar_op::end:
        return true;
    }
    return false;
  }

  static void mark_nullable(grammar& g) {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& r : g.rules_) {
        if (r.nullable) continue;
        for (uint32_t a : r.alts) {
          uint32_t i = a;
          while (g.elements_[i].op != grammar_op::end && element_nullable(g, g.elements_[i])) ++i;
          if (g.elements_[i].op == grammar_op::end) {
            r.nullable = changed = true;
            break;
          }
        }
      }
    }
    // A nullable body can meet any minimum with empty passes: min 0 says the same, and keeps
    // the matcher's counters meaning "non-empty passes" (grammar-matcher.cpp clips them).
    for (auto& e : g.elements_) {
      if (e.op == grammar_op::repeat && g.rules_[e.a].nullable) e.b = 0;
    }
  }

  // A rule that reaches itself in leftmost position (through nullable prefixes) would make the
  // matcher expand forever. Iterative depth-first search over those edges.
  static result<void> check_left_recursion(const grammar& g) {
    const size_t n = g.rules_.size();
    std::vector<std::vector<uint32_t>> left(n);
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t a : g.rules_[r].alts) {
        for (uint32_t i = a; g.elements_[i].op != grammar_op::end; ++i) {
          const auto& e = g.elements_[i];
          if (e.op == grammar_op::ref || e.op == grammar_op::repeat) left[r].push_back(e.a);
          if (!element_nullable(g, e)) break;
        }
      }
    }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      stack.push_back({s, 0});
      color[s] = 1;
      while (!stack.empty()) {
        auto& [r, next] = stack.back();
        if (next == left[r].size()) {
          color[r] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t t = left[r][next++];
        if (color[t] == 1) {
          return error{"grammar: left recursion: rule '" + g.rules_[t].name +
                       "' can reach itself before matching anything"};
        }
        if (color[t] == 0) {
          color[t] = 1;
          stack.push_back({t, 0});
        }
      }
    }
    return {};
  }

  std::string_view s_;
  size_t p_ = 0;
  std::string err_;
  std::vector<pending_rule> rules_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<grammar_charset> charsets_;
  std::map<grammar_charset, uint32_t> charset_ids_;
  size_t n_elements_ = 0;
};

std::string gbnf_quote(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

result<std::shared_ptr<const grammar>> grammar_from_gbnf(std::string_view gbnf) {
  return gbnf_compiler(gbnf).run();
}

}  // namespace hearth
