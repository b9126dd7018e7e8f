// libFuzzer target for tokenizer input: arbitrary bytes (invalid UTF-8, special-token text,
// U+2581) through the SentencePiece tokenizer, detokenization and the streaming UTF-8 filter.
// The vocabulary is the real stories260K one (path from HEARTH_FUZZ_VOCAB, default the test data).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/gguf.h"
#include "engine/utf8-stream.h"
#include "engine/vocab.h"

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace {

const hearth::vocab& fuzz_vocab() {
  static const hearth::vocab v = [] {
    const char* env = std::getenv("HEARTH_FUZZ_VOCAB");
    const std::string path = env ? env : HEARTH_FUZZ_DEFAULT_VOCAB;
    static auto file = hearth::gguf_file::open(path);  // the vocabulary views its strings
    if (!file) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", file.message().c_str());
      std::abort();
    }
    auto voc = hearth::vocab::from_gguf(*file);
    if (!voc) {
      std::fprintf(stderr, "tokenizer_fuzz: %s\n", voc.message().c_str());
      std::abort();
    }
    return std::move(voc).value();
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const hearth::vocab& v = fuzz_vocab();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool parse_special : {false, true}) {
    const auto ids = v.tokenize(text, true, parse_special);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < v.n_tokens());
    // Streaming the pieces through the UTF-8 filter yields exactly the detokenized bytes.
    hearth::utf8_stream stream;
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(v.token_to_piece(id, false));
    streamed += stream.flush();
    std::string joined;
    for (int32_t id : ids) joined += v.token_to_piece(id, false);
    FUZZ_CHECK(streamed == joined);
    (void)v.detokenize(ids, parse_special);
  }
  // Without special-token parsing valid text survives tokenization: byte fallback covers any
  // character. (U+2581 comes back as a space, as it means one; in invalid UTF-8 a stray lead
  // byte can swallow the bytes of an escaped space, as in the reference.)
  if (valid_utf8(text) && text.find("\xe2\x96\x81") == std::string_view::npos) {
    const auto ids = v.tokenize(text, false, false);
    FUZZ_CHECK(v.detokenize(ids, false) == text);
  }
  return 0;
}
