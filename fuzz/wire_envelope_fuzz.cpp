// libFuzzer target for a whole received message: open_envelope (schema/codec.cpp) on up to three
// frames, then the decoder of the command it names (checked as in wire_fuzz.h).
//
// Input: [n0][frame 0: n0 bytes][n1][frame 1: n1 bytes][frame 2: the rest]. An input that ends
// early gives fewer frames. wire_fuzz_seeds writes every message in this form.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz/wire_fuzz.h"

namespace {

using namespace hearth::wire;

std::vector<std::string_view> split_frames(std::string_view in) {
  std::vector<std::string_view> frames;
  for (int i = 0; i < 2 && !in.empty(); ++i) {
    const size_t n = std::min(size_t(uint8_t(in[0])), in.size() - 1);
    frames.push_back(in.substr(1, n));
    in.remove_prefix(1 + n);
  }
  if (frames.size() == 2) frames.push_back(in);
  return frames;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto frames = split_frames(std::string_view(reinterpret_cast<const char*>(data), size));
  const envelope_result r = open_envelope(frames);
  if (!r.ok) {
    FUZZ_CHECK(!r.err.message.empty());
    // version_mismatch exactly when the first frame is another "HEARTH/" signature.
    const bool other_version =
        !frames.empty() && frames[0] != signature && frames[0].substr(0, 7) == "HEARTH/";
    FUZZ_CHECK((r.err.code == error_code::version_mismatch) == other_version);
    FUZZ_CHECK(r.err.code == error_code::version_mismatch || r.err.code == error_code::malformed);
    return 0;
  }
  FUZZ_CHECK(frames.size() == 3 && frames[0] == signature && frames[1].size() == 1);
  FUZZ_CHECK(uint8_t(r.env.cmd) == uint8_t(frames[1][0]));
  FUZZ_CHECK(r.env.body.data() == frames[2].data() && r.env.body.size() == frames[2].size());
  switch (r.env.cmd) {
#define HEARTH_WIRE_FUZZ_CASE(M) \
  case M::cmd:                   \
    fuzz_decode<M>(r.env.body);  \
    break;
    HEARTH_WIRE_MESSAGES(HEARTH_WIRE_FUZZ_CASE)
#undef HEARTH_WIRE_FUZZ_CASE
  }
  return 0;
}
