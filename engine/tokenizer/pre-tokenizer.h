// Pre-tokenizers of byte-level BPE vocabularies: the text is cut into words by a list of regular
// expressions before BPE merges run inside each word. The list is chosen by name
// (tokenizer.ggml.pre) and is the one llama.cpp build 4748 uses (src/llama-vocab.cpp,
// llm_tokenizer_bpe), together with the per-name flags llama.cpp sets in llama_vocab::load.
//
// The expressions run under PCRE2 in UTF mode with Unicode properties (\p{L}, \p{N}, \s and
// lookaheads behave as in Hugging Face tokenizers, which produced the reference vectors), not
// under llama.cpp's own engine, which collapses some Unicode categories. \s means Unicode's
// White_Space, as there (PCRE2's own \s also takes U+180E, which Unicode no longer counts).
// Splitting follows llama.cpp's unicode_regex_split: each expression in turn cuts every piece left
// by the previous one, keeping both its matches and the text between them, and each piece is a
// subject of its own (a lookahead or `$` sees the end of the piece, not of the text).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth {

// One tokenizer.ggml.pre value and what llama.cpp does for it.
struct pre_tokenizer_spec {
  std::string_view name;
  std::span<const std::string_view> regexes;
  bool ignore_merges = false;  // a word that is a token is taken whole (Llama 3)
  bool add_bos = false;        // default of tokenizer.ggml.add_bos_token
  bool clean_spaces = true;    // detokenize drops the space before ? ! . , and some contractions
  bool no_bos = false;         // the default BOS id (11) is cleared (chatglm-bpe)
};

// The spec for a tokenizer.ggml.pre name; nullptr when llama.cpp does not know the name.
// An absent or empty name is "default", as in llama.cpp.
const pre_tokenizer_spec* pre_tokenizer_find(std::string_view name);

// Every known name, in table order.
std::vector<std::string_view> pre_tokenizer_names();

// The first name whose expressions are `regexes` (the importer's way from a tokenizer.json
// Split list to tokenizer.ggml.pre). The comparison accepts Hugging Face's spelling of the same
// expression: the case-insensitive contraction group (?i:'s|'t|'re|'ve|'m|'ll|'d), which
// llama.cpp writes out as (?:'[sS]|'[tT]|...), and a redundant final "|\s+" after "\s+(?!\S)"
// (text no alternative matches becomes a piece of its own anyway).
std::optional<std::string_view> pre_tokenizer_name_for(std::span<const std::string> regexes);

class pre_tokenizer {
 public:
  // Compiles the expressions; an error names the one PCRE2 rejects and why.
  static result<pre_tokenizer> create(std::span<const std::string_view> regexes);

  // Cuts `text` into words, in order. Their concatenation is the text as llama.cpp rebuilds it
  // from code points: ill-formed UTF-8 (and code points past U+10FFFF) become U+FFFD; anything
  // well formed, surrogates and overlong forms decoded leniently as llama.cpp does, is kept.
  void split(std::string_view text, std::vector<std::string>& words) const;

 private:
  struct regex;
  std::vector<std::shared_ptr<const regex>> regexes_;
};

}  // namespace hearth
