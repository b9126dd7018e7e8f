// A model's vocabulary from GGUF metadata (tokenizer.ggml.*) and text <-> token id conversion,
// matching llama.cpp (build 4748, src/llama-vocab.cpp) token for token.
//
// Tokenizing is two stages, as in llama.cpp: the text is first split around special tokens
// written in it (user-defined tokens always, control and unknown tokens only when asked), then
// each remaining text fragment goes through the model's algorithm, chosen by vocab_kind:
// SentencePiece-style (tokenizer.ggml.model = "llama", engine/tokenizer/tokenizer-spm.cpp) or
// byte-level BPE ("gpt2", engine/tokenizer/tokenizer-bpe.cpp, with the pre-tokenizer
// tokenizer.ggml.pre names from engine/tokenizer/pre-tokenizer.cpp). Another kind adds one case to
// the dispatch in tokenize(), its own tokenizer file beside those, and its piece rule in
// token_to_piece.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"

namespace hearth {

// What a token is, from tokenizer.ggml.token_type (1..6; 0 "undefined" is read as normal).
enum class token_attr : uint8_t { normal, unknown, control, user_defined, unused, byte };

enum class vocab_kind {
  spm,  // tokenizer.ggml.model = "llama": SentencePiece BPE with byte fallback
  bpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE with merges and a regex pre-tokenizer
};

class bpe_tokenizer;

class vocab {
 public:
  // Reads the tokenizer.ggml.* keys; the file may hold no tensors (vocab-only GGUF). Missing or
  // malformed metadata yields an error naming the key.
  static result<vocab> from_gguf(const gguf_file& f);

  vocab_kind kind() const { return kind_; }
  int32_t n_tokens() const { return int32_t(tokens_.size()); }
  // tokenizer.ggml.pre of a BPE vocabulary ("default" when the file names none); "" for SPM.
  const std::string& pre() const { return pre_; }

  // Special token ids, -1 when the model has none.
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  int32_t eot() const { return eot_; }

  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // detokenize() drops the space before ? ! . , and some apostrophe contractions, as llama.cpp
  // does for most BPE vocabularies (clean_up_tokenization_spaces); then a text that has such a
  // space does not survive detokenize(tokenize(text)).
  bool clean_spaces() const { return clean_spaces_; }

  // End of generation: eos, eot, end-of-message, the FIM pad/repo/file-separator tokens and the
  // control tokens llama.cpp recognises by text ("<|eot_id|>", "<|im_end|>", "<|end|>", ...).
  bool is_eog(int32_t id) const { return eog_.contains(id); }

  // Per-token data; `id` must be in [0, n_tokens()).
  token_attr attr(int32_t id) const;
  const std::string& text(int32_t id) const;
  float score(int32_t id) const;

  std::optional<int32_t> find(std::string_view text) const;

  // Text -> ids. add_special: BOS first / EOS last as add_bos() / add_eos() say. parse_special:
  // control and unknown tokens written in the text ("<s>") become those tokens; user-defined
  // tokens are matched either way.
  std::vector<int32_t> tokenize(std::string_view text, bool add_special, bool parse_special) const;

  // One token's bytes as a stream prints them: U+2581 as a space, a <0xXX> byte token as that
  // byte (so possibly part of a UTF-8 character); for BPE a normal token's characters mapped
  // back to their bytes (GPT-2's byte_to_unicode inverted) and byte tokens as nothing. Control
  // and unknown tokens give nothing unless `special` (then their text), user-defined tokens
  // their text, unused tokens nothing. Ids out of range give "".
  std::string token_to_piece(int32_t id, bool special) const;

  // Ids -> text, as llama.cpp's common_detokenize: pieces concatenated, and the space that
  // tokenize() prefixed (add_space_prefix) removed from the first token's piece. As in llama.cpp
  // only the very first token is stripped, so a leading BOS keeps the space of the word after it.
  // With clean_spaces() the result is cleaned up as llama.cpp's llama_detokenize does.
  std::string detokenize(std::span<const int32_t> ids, bool special) const;

 private:
  struct token_data {
    std::string text;
    float score = 0;
    token_attr attr = token_attr::normal;
    // When this token is matched in the text, the whitespace before / after it is dropped.
    bool lstrip = false;
    bool rstrip = false;
  };

  // A piece of the input after special-token partitioning: either raw text (token < 0) or a
  // special token found in it.
  struct fragment {
    int32_t token = -1;
    size_t offset = 0;
    size_t length = 0;
  };

  struct string_hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  result<void> load_special_tokens(const gguf_file& f);
  void detect_special_tokens_by_text();
  result<void> apply_model_token_attrs(const gguf_file& f);
  std::vector<fragment> partition(std::string_view text, bool parse_special) const;
  void tokenize_spm(std::string_view text, const std::vector<fragment>& fragments, bool add_special,
                    std::vector<int32_t>& out) const;
  void tokenize_bpe(std::string_view text, const std::vector<fragment>& fragments, bool add_special,
                    std::vector<int32_t>& out) const;

  vocab_kind kind_ = vocab_kind::spm;
  std::string pre_;
  std::shared_ptr<const bpe_tokenizer> bpe_;  // merges and compiled pre-tokenizer, for kind bpe
  std::vector<token_data> tokens_;
  std::unordered_map<std::string, int32_t, string_hash, std::equal_to<>> ids_;
  std::vector<std::string> pieces_;  // token_to_piece(id, special = true), precomputed
  std::vector<int32_t> special_;     // partition candidates, longest text first
  std::unordered_set<int32_t> eog_;

  int32_t bos_ = -1;
  int32_t eos_ = -1;
  int32_t unk_ = -1;
  int32_t eot_ = -1;
  int32_t eom_ = -1;
  int32_t fim_pre_ = -1;
  int32_t fim_suf_ = -1;
  int32_t fim_mid_ = -1;
  int32_t fim_pad_ = -1;
  int32_t fim_rep_ = -1;
  int32_t fim_sep_ = -1;

  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool clean_spaces_ = false;
};

}  // namespace hearth
