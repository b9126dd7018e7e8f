// libFuzzer target for curve_cert_parse (schema/curve-cert.cpp): the text of a certificate file a
// user pointed hearth at. Every input parses or returns an error naming its origin; a certificate
// that parses has 40-character Z85 keys, a matching pair when it has a secret key, and written
// back by curve_cert_{public,secret}_text it parses again to the same keys.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "schema/curve-cert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::net;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = curve_cert_parse(text, "fuzz.key");
  if (!c) {
    FUZZ_CHECK(c.message().starts_with("fuzz.key: "));
    return 0;
  }
  FUZZ_CHECK(c->public_key.size() == z85_key_chars);
  FUZZ_CHECK(c->secret_key.empty() || c->secret_key.size() == z85_key_chars);
  const bool secret = !c->secret_key.empty();
  auto again = curve_cert_parse(secret ? curve_cert_secret_text(*c) : curve_cert_public_text(*c),
                                "rewritten");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->public_key == c->public_key);
  FUZZ_CHECK(again->secret_key == c->secret_key);
  return 0;
}
