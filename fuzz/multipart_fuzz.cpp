// libFuzzer target for multipart_boundary and multipart_parse (gateway/multipart.cpp): the
// Content-Type header and the body of POST /v1/files, both from the network. The input is the
// header's value, a newline, then the body. Every input parses or returns an error; parts that
// parse are within the limits, named, and their content lies inside the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz-check.h"
#include "gateway/multipart.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::gateway;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  auto boundary = multipart_boundary(input.substr(0, eol));
  if (!boundary) {
    FUZZ_CHECK(boundary.message().starts_with("Content-Type: "));
    return 0;
  }
  FUZZ_CHECK(!boundary->empty() && boundary->size() <= 70);
  const std::string_view body = input.substr(eol + 1);
  multipart_limits limits;
  auto parts = multipart_parse(body, *boundary, limits);
  if (!parts) {
    FUZZ_CHECK(!parts.message().empty());
    return 0;
  }
  FUZZ_CHECK(parts->size() <= limits.max_parts);
  for (const form_part& p : *parts) {
    FUZZ_CHECK(!p.name.empty());
    FUZZ_CHECK(p.content.data() >= body.data());
    FUZZ_CHECK(p.content.data() + p.content.size() <= body.data() + body.size());
  }
  return 0;
}
