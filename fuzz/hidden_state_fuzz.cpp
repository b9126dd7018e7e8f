// libFuzzer target for hidden_decode (engine/io/hidden-state.cpp): the hidden-state rows a
// pipeline stage receives from another node. Input: an encoding byte (0 f32, 1 f16, 2 q8_0, mod
// 3), n_embd as a little-endian uint16, then the rows' bytes. Every input decodes to finite values
// or is refused; rows that decode encode back to the same byte count, and as F32 exactly.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/io/hidden-state.h"
#include "fuzz/fuzz-check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  if (size < 3) return 0;
  const auto e = hidden_encoding((data[0] & 0x7f) % 3);
  const int64_t n_embd = int64_t(data[1] | data[2] << 8);
  const std::span<const uint8_t> bytes(data + 3, size - 3);
  // The rows the bytes hold, one more when the encoding byte's top bit is set: a receiver sizes
  // `out` from the message's token count, which a hostile peer can get wrong.
  const uint64_t row = hidden_bytes(e, n_embd, 1);
  const size_t n_rows = (row > 0 ? bytes.size() / row : 1) + (data[0] & 0x80 ? 1 : 0);
  std::vector<float> out(n_embd > 0 ? n_rows * size_t(n_embd) : 0);
  const auto r = hidden_decode(e, bytes, n_embd, out);
  if (!r.ok()) {
    FUZZ_CHECK(!r.message().empty());
    return 0;
  }
  for (float v : out) FUZZ_CHECK(std::isfinite(v));
  const auto again = hidden_encode(e, out, n_embd);
  FUZZ_CHECK(again.size() == bytes.size());
  if (e == hidden_encoding::f32) FUZZ_CHECK(std::equal(again.begin(), again.end(), bytes.begin()));
  return 0;
}
