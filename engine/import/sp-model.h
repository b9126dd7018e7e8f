// A SentencePiece `tokenizer.model` file, loaded and run by the sentencepiece library itself:
// the reference the GGUF tokenizer (engine/tokenizer/vocab.h) is checked against, and the way to
// tokenize for models that ship only a tokenizer.model. The library's header stays inside engine/.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/io/gguf.h"

namespace hearth {

class sp_model {
 public:
  // Errors name the file and the library's reason.
  static result<sp_model> load(const std::string& path);

  sp_model(sp_model&&) noexcept;
  sp_model& operator=(sp_model&&) noexcept;
  ~sp_model();

  // The model's own normalisation and dummy prefix apply; no BOS/EOS is added.
  std::vector<int32_t> encode(std::string_view text) const;
  // Ids outside [0, n_tokens()) are skipped.
  std::string decode(std::span<const int32_t> ids) const;
  int32_t n_tokens() const;

 private:
  friend result<std::vector<gguf_kv>> sp_model_metadata(const std::string& path);
  struct impl;
  explicit sp_model(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The tokenizer.ggml.* metadata of a SentencePiece BPE `tokenizer.model`, as llama.cpp's
// converter writes it (model "llama", pre "default"): pieces, scores and token types by id
// (unknown, control, unused and byte from the library, user-defined from the model's piece
// types), the library's bos/eos/unk/pad ids (left out when disabled), add_bos_token true,
// add_eos_token false, and add_space_prefix from the normalizer's add_dummy_prefix. Feed it to
// vocab::from_gguf through gguf_file::from_parts. Errors name the file; a Unigram (or word/char)
// model is an error, as only the BPE algorithm is implemented.
result<std::vector<gguf_kv>> sp_model_metadata(const std::string& path);

}  // namespace hearth
