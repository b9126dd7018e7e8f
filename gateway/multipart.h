// multipart/form-data (RFC 7578) as POST /v1/files receives it: the boundary from the
// Content-Type header, then each part's Content-Disposition (name, filename), Content-Type and
// bytes. The body comes from the network: every malformation is an error that says what and
// where, never an exception, and what a part may hold is bounded (parts, header bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace hearth::gateway {

struct form_part {
  std::string name;          // Content-Disposition name="..."
  std::string filename;      // filename="..." ("" when none)
  std::string content_type;  // the part's Content-Type ("" when none)
  std::string_view content;  // a view into the body the parts were parsed from
};

struct multipart_limits {
  uint32_t max_parts = 16;
  uint32_t max_part_header_bytes = 8 << 10;  // one part's header block
};

// The boundary of a "multipart/form-data; boundary=..." Content-Type value.
result<std::string> multipart_boundary(std::string_view content_type);

// The parts of `body`; each part's content views `body`, which must outlive them.
result<std::vector<form_part>> multipart_parse(std::string_view body, std::string_view boundary,
                                               const multipart_limits& limits = {});

}  // namespace hearth::gateway
