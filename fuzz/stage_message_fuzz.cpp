// libFuzzer target for stage_message_read (node/stage-message.cpp): the stage_batch another
// node's stage sends to this node's stage socket, its header and its rows frame checked whole.
// Input: a flag byte (bit 0: a rows frame is there), the body's length as a little-endian
// uint16, the body, then the rows frame. Every input is refused with a reason or gives lists of
// one length within max_stage_tokens and exactly that many finite rows of n_embd.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz-check.h"
#include "node/stage-message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  if (size < 3) return 0;
  const bool has_rows = data[0] & 1;
  const size_t body_len = std::min<size_t>(size_t(data[1] | data[2] << 8), size - 3);
  const std::string code(1, char(wire::command::stage_batch));
  const std::string_view body(reinterpret_cast<const char*>(data + 3), body_len);
  const std::string_view rows(reinterpret_cast<const char*>(data + 3 + body_len),
                              size - 3 - body_len);
  std::vector<std::string_view> frames = {wire::signature, code, body};
  if (has_rows) frames.push_back(rows);
  const auto m = node::stage_message_read(frames);
  if (!m.ok()) {
    FUZZ_CHECK(!m.message().empty());
    return 0;
  }
  const auto& b = m->batch;
  const size_t n = b.tokens.size();
  FUZZ_CHECK(b.pos.size() == n && b.seqs.size() == n && b.logits.size() == n);
  FUZZ_CHECK(n <= wire::max_stage_tokens);
  FUZZ_CHECK(has_rows == !b.hidden_type.empty());
  FUZZ_CHECK(m->rows.size() == (has_rows ? n * b.n_embd : 0));
  for (float v : m->rows) FUZZ_CHECK(std::isfinite(v));
  FUZZ_CHECK(node::stage_tokens(b).size() == n);
  return 0;
}
