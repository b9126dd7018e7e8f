// Byte-level BPE (tokenizer.ggml.model = "gpt2") over one text fragment, as llama.cpp's
// llm_tokenizer_bpe_session (build 4748): the pre-tokenizer cuts the text into words, each word's
// bytes are written as GPT-2's printable stand-in characters (byte_to_unicode), and inside each
// word the adjacent pair with the lowest merge rank is merged until no pair has a rank (ties:
// leftmost first). A final piece that is not a token is written as the tokens of its single
// bytes where those exist (in byte-level vocabularies only ASCII ones do), else dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "engine/tokenizer/pre-tokenizer.h"

namespace hearth {

class vocab;

// GPT-2's bytes_to_unicode: every byte as a printable character (printable Latin-1 stays, the
// rest map to U+0100 onwards; a space becomes U+0120 'Ġ'), UTF-8 encoded.
std::string bpe_byte_encode(std::string_view bytes);

// The inverse, as llama.cpp's llama_decode_text: each character of a token text back to its
// byte. A character outside the map is written "[UNK_BYTE_0x<its UTF-8 in hex><the whole token
// text>]", exactly as llama.cpp does; ill-formed UTF-8 counts as U+FFFD.
std::string bpe_byte_decode(std::string_view text);

class bpe_tokenizer {
 public:
  // `merges`: tokenizer.ggml.merges, "left right" split at the first space after the first
  // byte, rank = index; the first of duplicate pairs wins. An entry without such a space merges
  // nothing (as in llama.cpp). Errors come from compiling the pre-tokenizer's expressions.
  static result<bpe_tokenizer> create(std::span<const std::string> merges,
                                      const pre_tokenizer_spec& pre);

  // Appends the ids for `text` (raw bytes, one fragment between special tokens) to `out`.
  void tokenize(const vocab& v, std::string_view text, std::vector<int32_t>& out) const;

 private:
  struct string_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The rank of merging `left` and `right`, -1 when they do not merge. `key` is scratch space.
  int32_t rank(std::string_view left, std::string_view right, std::string& key) const;
  void tokenize_word(const vocab& v, const std::string& word, std::vector<int32_t>& out) const;

  pre_tokenizer pre_;
  bool ignore_merges_ = false;
  // Keyed by "left right": pieces of byte-encoded words never hold a space (byte 0x20 is 'Ġ'),
  // so the key names one pair.
  std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>> ranks_;
};

}  // namespace hearth
