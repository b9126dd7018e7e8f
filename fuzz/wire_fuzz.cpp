// libFuzzer target for the decoder of one wire message (schema/codec.cpp), compiled once per
// message with -DHEARTH_WIRE_FUZZ_MESSAGE=<name> (fuzz/CMakeLists.txt). The input is a body;
// see wire_fuzz.h for what is checked.
#include <cstddef>
#include <cstdint>

#include "fuzz/wire_fuzz.h"

#ifndef HEARTH_WIRE_FUZZ_MESSAGE
#error "define HEARTH_WIRE_FUZZ_MESSAGE to the message to fuzz, e.g. job_assign"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::wire;
  fuzz_decode<HEARTH_WIRE_FUZZ_MESSAGE>(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
