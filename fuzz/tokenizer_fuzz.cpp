// libFuzzer target for tokenizer input: arbitrary bytes (invalid UTF-8, special-token text,
// U+2581) through the SentencePiece and byte-level BPE tokenizers, detokenization and the
// streaming UTF-8 filter. The vocabularies are real ones from the test data: stories260K's
// SentencePiece one (HEARTH_FUZZ_VOCAB), GPT-2's (HEARTH_FUZZ_BPE_VOCAB: one regex, cleaned-up
// spaces) and DeepSeek LLM's (HEARTH_FUZZ_BPE_VOCAB2: six regexes, a BOS).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io/gguf.h"
#include "engine/tokenizer/utf8-stream.h"
#include "engine/tokenizer/vocab.h"
#include "fuzz/fuzz-check.h"

namespace {

hearth::vocab load_vocab(const char* env_name, const char* default_path) {
  const char* env = std::getenv(env_name);
  const std::string path = env ? env : default_path;
  const auto file = hearth::gguf_file::open(path);
  if (!file) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", file.message().c_str());
    std::abort();
  }
  auto voc = hearth::vocab::from_gguf(file.value());
  if (!voc) {
    std::fprintf(stderr, "tokenizer_fuzz: %s: %s\n", path.c_str(), voc.message().c_str());
    std::abort();
  }
  return std::move(voc).value();
}

const std::vector<hearth::vocab>& fuzz_vocabs() {
  static const std::vector<hearth::vocab> v = [] {
    std::vector<hearth::vocab> all;
    all.push_back(load_vocab("HEARTH_FUZZ_VOCAB", HEARTH_FUZZ_DEFAULT_VOCAB));
    all.push_back(load_vocab("HEARTH_FUZZ_BPE_VOCAB", HEARTH_FUZZ_DEFAULT_BPE_VOCAB));
    all.push_back(load_vocab("HEARTH_FUZZ_BPE_VOCAB2", HEARTH_FUZZ_DEFAULT_BPE_VOCAB2));
    return all;
  }();
  return v;
}

// Strict UTF-8 validation (no overlongs, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

// Where detokenize's clean-up (clean_spaces) would change the text back.
bool has_cleaned_up_space(std::string_view s) {
  for (const char* form : {" ?", " !", " .", " ,", " '"}) {
    if (s.find(form) != std::string_view::npos) return true;
  }
  return false;
}

void check(const hearth::vocab& v, std::string_view text) {
  for (bool parse_special : {false, true}) {
    const auto ids = v.tokenize(text, true, parse_special);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < v.n_tokens());
    // Streaming the pieces through the UTF-8 filter yields exactly the detokenized bytes, but
    // for an unfinished character at the end (at most 3 bytes held back), which the end of the
    // stream turns into one U+FFFD.
    hearth::utf8_stream stream;
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(v.token_to_piece(id, false));
    std::string joined;
    for (int32_t id : ids) joined += v.token_to_piece(id, false);
    FUZZ_CHECK(joined.starts_with(streamed));
    const size_t held = joined.size() - streamed.size();
    FUZZ_CHECK(held <= 3 && stream.holds_back() == (held > 0));
    FUZZ_CHECK(stream.flush() == (held > 0 ? "\xEF\xBF\xBD" : ""));
    (void)v.detokenize(ids, parse_special);
  }
  // Without special-token parsing valid text survives tokenization: byte fallback (SPM) and the
  // byte alphabet (BPE) cover any character. (For SPM, U+2581 comes back as a space, as it means
  // one; in invalid UTF-8 a stray lead byte can swallow the bytes of an escaped space, as in the
  // reference. For BPE, ill-formed UTF-8 becomes U+FFFD, and clean_spaces drops some spaces.)
  const bool spm = v.kind() == hearth::vocab_kind::spm;
  if (valid_utf8(text) && (!spm || text.find("\xe2\x96\x81") == std::string_view::npos) &&
      (!v.clean_spaces() || !has_cleaned_up_space(text))) {
    const auto ids = v.tokenize(text, false, false);
    FUZZ_CHECK(v.detokenize(ids, false) == text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const hearth::vocab& v : fuzz_vocabs()) check(v, text);
  return 0;
}
