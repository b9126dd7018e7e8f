#include "schema/json-shape.h"

#include <locale.h>
#include <stdlib.h>

#include <cmath>
#include <string>

namespace hearth::wire {
namespace {

// One pass of recursive descent; every function leaves pos_ after what it read, or sets error_.
class json_scanner {
 public:
  explicit json_scanner(std::string_view text) : s_(text) {}

  result<json_shape> run() {
    json_shape shape;
    skip_space();
    shape.kind = peek_kind();
    if (!value(0, &shape)) return error{error_};
    skip_space();
    if (pos_ != s_.size()) return error{"text after the value at byte " + std::to_string(pos_)};
    return shape;
  }

 private:
  bool fail(const char* what) {
    error_ = std::string(what) + " at byte " + std::to_string(pos_);
    return false;
  }

  bool at_end() const { return pos_ >= s_.size(); }
  unsigned char peek() const { return at_end() ? 0 : static_cast<unsigned char>(s_[pos_]); }

  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  json_kind peek_kind() const {
    switch (peek()) {
      case '{':
        return json_kind::object;
      case '[':
        return json_kind::array;
      case '"':
        return json_kind::string;
      case 't':
      case 'f':
        return json_kind::boolean;
      case 'n':
        return json_kind::null;
      default:
        return json_kind::number;
    }
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("expected a value");
    pos_ += word.size();
    return true;
  }

  // `top`, when given, receives the outline of this value's members (the top-level value only).
  bool value(size_t depth, json_shape* top) {
    switch (peek()) {
      case '{':
        return object(depth + 1, top);
      case '[':
        return array(depth + 1, top);
      case '"':
        return string();
      case 't':
        return literal("true");
      case 'f':
        return literal("false");
      case 'n':
        return literal("null");
      default:
        return number();
    }
  }

  bool object(size_t depth, json_shape* top) {
    if (depth > json_shape_max_depth) return fail("nested deeper than 64");
    ++pos_;
    skip_space();
    if (peek() == '}') return ++pos_, true;
    for (;;) {
      if (peek() != '"') return fail("expected a key");
      if (!string()) return false;
      skip_space();
      if (peek() != ':') return fail("expected ':'");
      ++pos_;
      skip_space();
      if (!value(depth, nullptr)) return false;
      if (top) ++top->members;
      skip_space();
      if (peek() == '}') return ++pos_, true;
      if (peek() != ',') return fail("expected ',' or '}'");
      ++pos_;
      skip_space();
    }
  }

  bool array(size_t depth, json_shape* top) {
    if (depth > json_shape_max_depth) return fail("nested deeper than 64");
    ++pos_;
    skip_space();
    if (peek() == ']') return ++pos_, true;
    for (;;) {
      if (top) {
        ++top->members;
        top->members_are_objects = top->members_are_objects && peek() == '{';
      }
      if (!value(depth, nullptr)) return false;
      skip_space();
      if (peek() == ']') return ++pos_, true;
      if (peek() != ',') return fail("expected ',' or ']'");
      ++pos_;
      skip_space();
    }
  }

  bool digits() {
    if (peek() < '0' || peek() > '9') return fail("expected a digit");
    while (peek() >= '0' && peek() <= '9') ++pos_;
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, whose value is a finite double: the JSON
  // parsers that read these texts later (nlohmann-json's, in the node and the gateway) refuse a
  // number that overflows one, so it is refused here first.
  bool number() {
    const size_t start = pos_;
    if (!number_syntax()) return false;
    // strtod_l in the C locale: the decimal point is '.' whatever the process's locale.
    static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", locale_t(0));
    const std::string digits(s_.substr(start, pos_ - start));
    if (!std::isfinite(strtod_l(digits.c_str(), nullptr, c_locale))) {
      pos_ = start;
      return fail("a number too large for a double");
    }
    return true;
  }

  bool number_syntax() {
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      digits();
    } else {
      return fail("expected a value");
    }
    if (peek() == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) return false;
    }
    return true;
  }

  // Four hex digits of a \u escape.
  bool hex4(uint32_t& out) {
    out = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      unsigned char c = peek();
      uint32_t d = c >= '0' && c <= '9'   ? c - '0'
                   : c >= 'a' && c <= 'f' ? c - 'a' + 10
                   : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : 16;
      if (d == 16) return fail("expected four hex digits after \\u");
      out = out * 16 + d;
    }
    return true;
  }

  // A \u escape; a UTF-16 high surrogate must be followed by an escaped low one.
  bool unicode_escape() {
    uint32_t u = 0;
    if (!hex4(u)) return false;
    if (u >= 0xDC00 && u <= 0xDFFF) return fail("a lone low surrogate");
    if (u >= 0xD800 && u <= 0xDBFF) {
      if (s_.substr(pos_, 2) != "\\u") return fail("a high surrogate without its low one");
      pos_ += 2;
      if (!hex4(u)) return false;
      if (u < 0xDC00 || u > 0xDFFF) return fail("a high surrogate without its low one");
    }
    return true;
  }

  // One UTF-8 character of two to four bytes (no overlong forms, no surrogates, <= U+10FFFF).
  bool utf8_char() {
    const unsigned char c = peek();
    size_t n = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (n == 0 || pos_ + n > s_.size()) return fail("invalid UTF-8");
    const unsigned char c1 = static_cast<unsigned char>(s_[pos_ + 1]);
    unsigned char lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (c1 < lo || c1 > hi) return fail("invalid UTF-8");
    for (size_t i = 2; i < n; ++i) {
      const unsigned char ci = static_cast<unsigned char>(s_[pos_ + i]);
      if (ci < 0x80 || ci > 0xBF) return fail("invalid UTF-8");
    }
    pos_ += n;
    return true;
  }

  bool string() {
    ++pos_;  // the opening quote
    for (;;) {
      if (at_end()) return fail("an unended string");
      const unsigned char c = peek();
      if (c == '"') return ++pos_, true;
      if (c < 0x20) return fail("a control character in a string");
      if (c >= 0x80) {
        if (!utf8_char()) return false;
        continue;
      }
      ++pos_;
      if (c != '\\') continue;
      const unsigned char e = peek();
      ++pos_;
      if (e == 'u') {
        if (!unicode_escape()) return false;
      } else if (std::string_view("\"\\/bfnrt").find(char(e)) == std::string_view::npos || e == 0) {
        --pos_;
        return fail("an invalid escape");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

const char* json_kind_name(json_kind k) {
  switch (k) {
    case json_kind::null:
      return "null";
    case json_kind::boolean:
      return "a boolean";
    case json_kind::number:
      return "a number";
    case json_kind::string:
      return "a string";
    case json_kind::array:
      return "an array";
    case json_kind::object:
      return "an object";
  }
  return "?";
}

result<json_shape> json_shape_of(std::string_view text) {
  return json_scanner(text).run();
}

}  // namespace hearth::wire
