// Percent-decoding of URL parts (RFC 3986), shared by the request's query parameters
// (http.cpp) and the path the server routes on (http-server.cpp).
#pragma once

#include <string>
#include <string_view>

namespace hearth::gateway {

// Decodes "%XX" escapes; a '%' not followed by two hex digits stays as it is (a client's
// mistake, not ours to reject). With `plus_is_space` (a query, as HTML forms encode it) '+' is
// a space.
std::string percent_decode(std::string_view s, bool plus_is_space);

}  // namespace hearth::gateway
