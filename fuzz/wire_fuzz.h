// The property every wire fuzz target checks (wire_fuzz.cpp, wire_envelope_fuzz.cpp): a body
// either decodes or gives an error naming the message, and a body that decodes re-encodes to the
// codec's own form, which decodes and encodes to exactly the same bytes again. A failed check
// aborts, so libFuzzer reports it like a crash.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "schema/codec.h"

namespace hearth::wire {

template <class M>
void fuzz_decode(std::string_view body) {
  const auto m = decode<M>(body);
  if (!m) {
    const std::string prefix = std::string(command_name(M::cmd)) + ": ";
    FUZZ_CHECK(m.message().size() > prefix.size());
    FUZZ_CHECK(m.message().compare(0, prefix.size(), prefix) == 0);
    return;
  }
  const std::string once = encode(m.value());
  const auto again = decode<M>(once);
  if (!again) {
    std::fprintf(stderr, "the re-encoded %s does not decode: %s\n",
                 std::string(command_name(M::cmd)).c_str(), again.message().c_str());
    std::abort();
  }
  FUZZ_CHECK(encode(again.value()) == once);
}

}  // namespace hearth::wire
