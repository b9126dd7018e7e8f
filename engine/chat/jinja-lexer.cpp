#include "engine/chat/jinja-lexer.h"

#include <cerrno>
#include <cstdlib>

#include "engine/chat/jinja-value.h"
#include "engine/tokenizer/utf8.h"

namespace hearth::jinja {
namespace {

[[noreturn]] void syntax_error(std::string_view what, int line) {
  fail("TemplateSyntaxError", std::string(what) + " (line " + std::to_string(line) + ")");
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// jinja2 reads the source with its newlines normalised to "\n" and without one trailing newline
// (keep_trailing_newline is off).
std::string normalize(std::string_view src) {
  std::string s;
  s.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      s += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      s += src[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Python's unicode-escape decoding of a string literal's body, as jinja2 applies it.
std::string unescape(std::string_view s) {
  std::string out;
  auto hex = [&](size_t& i, int n) -> int64_t {
    if (i + static_cast<size_t>(n) > s.size()) return -1;
    int64_t v = 0;
    for (int k = 0; k < n; ++k) {
      char c = s[i + static_cast<size_t>(k)];
      int d = is_digit(c)              ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    i += static_cast<size_t>(n);
    return v;
  };
  for (size_t i = 0; i < s.size();) {
    char c = s[i++];
    if (c != '\\' || i >= s.size()) {
      out += c;
      continue;
    }
    char e = s[i++];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        int64_t v = hex(i, e == 'x' ? 2 : e == 'u' ? 4 : 8);
        if (v < 0 || v > 0x10ffff)
          fail("TemplateSyntaxError", "truncated \\" + std::string(1, e) + " escape");
        utf8_append(out, static_cast<uint32_t>(v));
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i < s.size() && s[i] >= '0' && s[i] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(s[i++] - '0');
          utf8_append(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class lexer {
 public:
  explicit lexer(std::string_view src) : s_(normalize(src)) {}

  std::vector<token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      size_t open = find_open(pos_);
      if (open == std::string::npos) {
        add_text(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      char kind = s_[open + 1];
      char sign = open + 2 < s_.size() ? s_[open + 2] : 0;
      std::string text = s_.substr(pos_, open - pos_);
      if (sign == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces between the line's start and a block or comment tag go.
        size_t l = text.rfind('\n');
        size_t l_pos = l == std::string::npos ? 0 : l + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      add_text(text);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        line_starting = comment();
      } else if (kind == '%' && raw_begin()) {
        line_starting = raw();
      } else {
        line_starting = tag(kind == '%');
      }
    }
    toks_.push_back(token{token_kind::eof, "", 0, 0, line_});
    return std::move(toks_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1))
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  void add_text(std::string_view t) {
    if (t.empty()) return;
    toks_.push_back(token{token_kind::text, std::string(t), 0, 0, line_});
    count_lines(t);
  }
  void count_lines(std::string_view t) {
    for (char c : t) line_ += c == '\n';
  }
  // Moves pos_ to `to`, counting the lines passed.
  void advance(size_t to) {
    count_lines(std::string_view(s_).substr(pos_, to - pos_));
    pos_ = to;
  }

  // After a closing delimiter: "-" strips all whitespace after it, trim_blocks one newline.
  // Returns whether the text after it starts a line (lstrip_blocks looks at that).
  bool after_end(bool strip, bool trim_newline) {
    if (strip) {
      size_t e = pos_;
      while (e < s_.size() && is_space(s_[e])) ++e;
      bool nl = e > pos_ && s_[e - 1] == '\n';
      advance(e);
      return nl;
    }
    if (trim_newline && pos_ < s_.size() && s_[pos_] == '\n') {
      advance(pos_ + 1);
      return true;
    }
    return false;
  }

  bool comment() {
    size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) syntax_error("Missing end of comment tag", line_);
    bool strip = end > pos_ && s_[end - 1] == '-';
    advance(end + 2);
    return after_end(strip, true);
  }

  // {% raw %} at pos_ (after "{%" and its sign)? As jinja2's raw_begin: "raw" between optional
  // whitespace, closed by "-%}" or "%}" (not "+%}": that is the tag "raw", unknown).
  bool raw_begin() {
    size_t i = pos_;
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (s_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (i < s_.size() && s_[i] == '-') ++i;
    return s_.compare(i, 2, "%}") == 0;
  }

  bool raw() {
    int start_line = line_;
    size_t close = s_.find("%}", pos_);
    if (close == std::string::npos) syntax_error("Missing end of raw directive", start_line);
    bool strip = s_[close - 1] == '-';
    advance(close + 2);
    after_end(strip, false);
    // The body runs to the first {% endraw %}.
    for (size_t i = find_open(pos_); i != std::string::npos; i = find_open(i + 1)) {
      if (s_[i + 1] != '%') continue;
      size_t j = i + 2;
      char sign = j < s_.size() ? s_[j] : 0;
      if (sign == '-' || sign == '+') ++j;
      while (j < s_.size() && is_space(s_[j])) ++j;
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < s_.size() && is_space(s_[j])) ++j;
      bool end_strip = j < s_.size() && s_[j] == '-';
      bool end_keep = j < s_.size() && s_[j] == '+';
      if (end_strip || end_keep) ++j;
      if (s_.compare(j, 2, "%}") != 0) continue;
      std::string body = s_.substr(pos_, i - pos_);
      if (sign == '-') {
        while (!body.empty() && is_space(body.back())) body.pop_back();
      } else if (sign != '+') {
        size_t l = body.rfind('\n');
        size_t l_pos = l == std::string::npos ? 0 : l + 1;
        bool blank = l_pos < body.size();
        for (size_t k = l_pos; k < body.size(); ++k) blank = blank && is_space(body[k]);
        if (blank && l_pos > 0) body.resize(l_pos);
      }
      add_text(body);
      pos_ = i;
      advance(j + 2);
      return after_end(end_strip, !end_keep);
    }
    syntax_error("Missing end of raw directive", start_line);
  }

  // The inside of {{ }} or {% %}, up to the closing delimiter.
  bool tag(bool block) {
    toks_.push_back(
        token{block ? token_kind::block_begin : token_kind::var_begin, "", 0, 0, line_});
    int start_line = line_;
    std::string brackets;
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) advance(pos_ + 1);
      if (pos_ >= s_.size())
        syntax_error(block ? "unexpected end of template, expected 'end of statement block'"
                           : "unexpected end of template, expected 'end of print statement'",
                     start_line);
      if (brackets.empty()) {
        std::string_view rest = std::string_view(s_).substr(pos_);
        std::string_view close = block ? "%}" : "}}";
        bool strip = rest.size() > 2 && rest[0] == '-' && rest.substr(1, 2) == close;
        bool keep = block && rest.size() > 2 && rest[0] == '+' && rest.substr(1, 2) == close;
        if (strip || keep || rest.substr(0, 2) == close) {
          toks_.push_back(
              token{block ? token_kind::block_end : token_kind::var_end, "", 0, 0, line_});
          advance(pos_ + (strip || keep ? 3 : 2));
          return after_end(strip, block && !keep);
        }
      }
      char c = s_[pos_];
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && (is_name_start(s_[e]) || is_digit(s_[e]))) ++e;
        toks_.push_back(token{token_kind::name, s_.substr(pos_, e - pos_), 0, 0, line_});
        pos_ = e;
      } else if (is_digit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(brackets);
      }
    }
  }

  void number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < s_.size() &&
             (is_digit(s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && is_digit(s_[e + 1]))))
        ++e;
    };
    digits();
    bool is_float = false;
    bool after_dot =
        !toks_.empty() && toks_.back().kind == token_kind::op && toks_.back().text == ".";
    if (!after_dot && e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (!after_dot && e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && is_digit(s_[x])) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (s_[i] != '_') text += s_[i];
    token t{is_float ? token_kind::floating : token_kind::integer, text, 0, 0, line_};
    errno = 0;
    if (is_float) {
      t.floating = std::strtod(text.c_str(), nullptr);
    } else {
      t.integer = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) syntax_error("integer literal too large", line_);
    }
    toks_.push_back(std::move(t));
    pos_ = e;
  }

  void string_literal(char q) {
    size_t e = pos_ + 1;
    while (e < s_.size() && s_[e] != q) e += s_[e] == '\\' ? 2 : 1;
    if (e >= s_.size()) syntax_error("unexpected end of string", line_);
    std::string body = s_.substr(pos_ + 1, e - pos_ - 1);
    toks_.push_back(token{token_kind::string, unescape(body), 0, 0, line_});
    advance(e + 1);
  }

  void op(std::string& brackets) {
    static constexpr std::string_view two[] = {"//", "**", "==", "!=", "<=", ">="};
    std::string_view rest = std::string_view(s_).substr(pos_);
    for (std::string_view t : two)
      if (rest.substr(0, 2) == t) {
        toks_.push_back(token{token_kind::op, std::string(t), 0, 0, line_});
        pos_ += 2;
        return;
      }
    char c = s_[pos_];
    static constexpr std::string_view one = "+-/*%~[](){}<>=.:|,;";
    if (one.find(c) == std::string_view::npos)
      syntax_error("unexpected char '" + std::string(1, c) + "'", line_);
    if (c == '(' || c == '[' || c == '{') {
      if (brackets.size() > 256) syntax_error("brackets nested too deeply", line_);
      brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty() || brackets.back() != c)
        syntax_error("unexpected '" + std::string(1, c) + "'", line_);
      brackets.pop_back();
    }
    toks_.push_back(token{token_kind::op, std::string(1, c), 0, 0, line_});
    ++pos_;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<token> toks_;
};

}  // namespace

std::vector<token> lex(std::string_view source) {
  return lexer(source).run();
}

}  // namespace hearth::jinja
