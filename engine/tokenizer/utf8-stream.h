// Reassembles UTF-8 characters from a stream of byte pieces (one token's bytes at a time), so a
// character split across byte tokens (<0xE2><0x96><0x81>) is printed only once it is whole.
//
// Bytes that can never be part of a valid character (a stray continuation byte, 0xC0, 0xC1,
// 0xF5..0xFF, a lead byte followed by a non-continuation, an overlong or surrogate prefix) are
// passed through as they are as soon as that is certain, so bad model output is never held back.
#pragma once

#include <string>
#include <string_view>

namespace hearth {

class utf8_stream {
 public:
  // Appends `bytes` to the buffer and returns the longest prefix of it that is whole characters
  // (invalid bytes included, see above). What remains is an incomplete character, at most 3
  // bytes.
  std::string push(std::string_view bytes);
  // The end of the stream: an unfinished character (what push() held back) becomes one U+FFFD,
  // as llama-server and Ollama end such a stream, so the text is valid UTF-8; "" when nothing
  // is held back. Empties the buffer.
  std::string flush();
  // push() holds back part of a character.
  bool holds_back() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

}  // namespace hearth
