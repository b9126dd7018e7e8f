// libFuzzer target for the grammar compilers (engine/grammar/): the input is GBNF text, or (first
// byte 'J') a JSON Schema whose GBNF is then compiled. Every input must give a grammar or an error,
// never a crash, leak, hang or exception; a compiled schema's GBNF must compile. A grammar is then
// run: a matcher over a small vocabulary computes masks and follows the input's own bytes, so
// the automaton's caps (depth, stacks, states) are exercised on hostile grammars.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar-matcher.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json-schema.h"
#include "fuzz/fuzz-check.h"

namespace {

std::shared_ptr<const hearth::grammar_vocab> fuzz_vocab() {
  static auto v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    for (const char* p : {"{\"", "\":", "\", \"", "true", "null", "[1,", "é", "\xe4\xb8", "  "}) {
      pieces.push_back(p);
    }
    return hearth::grammar_vocab::make(pieces, {0});
  }();
  return v;
}

void run(const std::shared_ptr<const hearth::grammar>& g, std::string_view follow) {
  hearth::grammar_matcher m(g, fuzz_vocab());
  for (size_t i = 0; i < follow.size() && i < 64; ++i) {
    if (i % 8 == 0) {
      // The wrap-up's tokens are allowed ones (a copy: a later call may reuse the buffer).
      const auto allowed = m.allowed();
      const std::vector<uint64_t> all(allowed.begin(), allowed.end());
      (void)m.min_completion();
      const auto shorter = m.allowed_shortening();
      for (size_t w = 0; w < all.size(); ++w) FUZZ_CHECK((shorter[w] & ~all[w]) == 0);
    }
    const auto mask = m.allowed();
    FUZZ_CHECK(mask.size() == (size_t(fuzz_vocab()->n_tokens()) + 63) / 64);
    const int32_t t = static_cast<unsigned char>(follow[i]) % fuzz_vocab()->n_tokens();
    const bool in_mask = (mask[size_t(t) / 64] >> (t % 64)) & 1;
    // A mask may leave out what a cap of its walk refused, never allow what the grammar forbids.
    if (in_mask) FUZZ_CHECK(m.accept(t));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == 'J') {
    auto gbnf = hearth::json_schema_to_gbnf(input.substr(1));
    if (!gbnf) {
      FUZZ_CHECK(!gbnf.message().empty());
      return 0;
    }
    auto g = hearth::grammar_from_gbnf(*gbnf);
    // The compiler's own output always compiles, except a schema that refers to itself before
    // anything else ({"$ref": "#"}), which is left recursion, or one past the grammar's size caps.
    FUZZ_CHECK(g.ok() || g.message().find("left recursion") != std::string::npos ||
               g.message().find("more than") != std::string::npos);
    if (g.ok()) run(*g, input);
    return 0;
  }
  auto g = hearth::grammar_from_gbnf(input);
  if (!g) {
    FUZZ_CHECK(!g.message().empty());
    return 0;
  }
  run(*g, input);
  return 0;
}
