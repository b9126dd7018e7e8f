// libFuzzer target for Hugging Face tokenizer files (engine/import/hf-tokenizer.cpp): the input is
// tokenizer.json, optionally followed by a NUL byte and tokenizer_config.json (valid JSON never
// holds a raw NUL). Every input must give metadata or an error, never a crash, leak or
// exception. Metadata must be a valid in-memory GGUF (unique keys), and the vocabulary it
// describes must load (or be refused by vocab::from_gguf with an error) and tokenize a few
// texts, and the input itself, into ids of that vocabulary.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/import/hf-tokenizer.h"
#include "engine/io/gguf.h"
#include "engine/tokenizer/vocab.h"
#include "fuzz/fuzz-check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string json(input.substr(0, nul));
  const std::string config(nul == std::string_view::npos ? std::string_view()
                                                         : input.substr(nul + 1));

  auto kv = hearth::hf_tokenizer_metadata(json, config);
  if (!kv) {
    FUZZ_CHECK(!kv.message().empty());
    return 0;
  }
  auto file = hearth::gguf_file::from_parts(std::move(kv).value(), {}, nullptr);
  FUZZ_CHECK(file.ok());  // the importer writes each key once
  auto v = hearth::vocab::from_gguf(*file);
  if (!v) {
    // The one refusal the importer cannot foresee: an empty token text, which the reader
    // renames "[EMPTY_<id>]", colliding with a token of that text.
    FUZZ_CHECK(v.message().find("appears twice") != std::string::npos);
    return 0;
  }
  FUZZ_CHECK(v->kind() == hearth::vocab_kind::bpe);
  for (const std::string_view text :
       {std::string_view("Hello world's  123\n\n x"),
        json.size() > 512 ? std::string_view(json).substr(0, 512) : std::string_view(json)}) {
    for (const bool parse_special : {false, true}) {
      const auto ids = v->tokenize(text, true, parse_special);
      for (const int32_t id : ids) FUZZ_CHECK(id >= 0 && id < v->n_tokens());
      (void)v->detokenize(ids, parse_special);
    }
  }
  return 0;
}
