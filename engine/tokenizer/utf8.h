// Encoding one code point as UTF-8, shared by the tokenizers.
#pragma once

#include <cstdint>
#include <string>

namespace hearth {

// Appends `cp` as 1 to 4 bytes. Surrogates are encoded like any other code point, as llama.cpp's
// unicode_cpt_to_utf8 does; callers that need well-formed UTF-8 replace them first.
inline void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | cp >> 6);
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | cp >> 12);
    out += char(0x80 | (cp >> 6 & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | cp >> 18);
    out += char(0x80 | (cp >> 12 & 0x3F));
    out += char(0x80 | (cp >> 6 & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace hearth
