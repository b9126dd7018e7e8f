#include "engine/tokenizer/utf8-stream.h"

#include <cstdint>

namespace hearth {
namespace {

// Total length of the character a lead byte starts, or 0 when the byte cannot start one.
size_t utf8_sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Range of the byte after a lead byte (RFC 3629 table): the narrower ranges exclude overlong
// forms (E0, F0), UTF-16 surrogates (ED) and code points above U+10FFFF (F4).
bool utf8_second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

enum class utf8_scan { complete, incomplete, invalid };

// Classifies the character starting at s[0]: whole (its length in *n), cut off by the end of
// `s`, or invalid (the lead byte alone must be passed through).
utf8_scan utf8_scan_char(std::string_view s, size_t* n) {
  const auto lead = uint8_t(s[0]);
  const size_t len = utf8_sequence_length(lead);
  if (len == 0) return utf8_scan::invalid;
  for (size_t k = 1; k < len; ++k) {
    if (k >= s.size()) return utf8_scan::incomplete;
    const auto b = uint8_t(s[k]);
    const bool ok = k == 1 ? utf8_second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return utf8_scan::invalid;
  }
  *n = len;
  return utf8_scan::complete;
}

}  // namespace

std::string utf8_stream::push(std::string_view bytes) {
  pending_.append(bytes);
  const std::string_view buf = pending_;
  size_t done = 0;
  while (done < buf.size()) {
    size_t n = 0;
    const utf8_scan s = utf8_scan_char(buf.substr(done), &n);
    if (s == utf8_scan::incomplete) break;
    done += s == utf8_scan::complete ? n : 1;
  }
  std::string out = pending_.substr(0, done);
  pending_.erase(0, done);
  return out;
}

std::string utf8_stream::flush() {
  // pending_ is always the beginning of one valid character (push passes invalid bytes on), so it
  // is one "maximal subpart" and Unicode's practice replaces it by a single U+FFFD.
  if (pending_.empty()) return {};
  pending_.clear();
  return "\xEF\xBF\xBD";
}

}  // namespace hearth
