// msgpack bodies of the messages in schema/messages.h, and the three-frame envelope around them.
//
// Decoding is strict and never throws: bytes from the network that are not a well-formed body of
// the expected message (wrong type, missing field, integer out of range, a string or array over
// the limits, trailing bytes) give an error value naming the field. Unknown fields are ignored so
// that a later minor version may add optional ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "schema/messages.h"

namespace hearth::wire {

// The msgpack body of a message.
template <class M>
std::string encode(const M& m);

// Parses a body of message M.
template <class M>
result<M> decode(std::string_view body);

// The request_id of a body that does not decode, read leniently: the top map's "request_id" when
// it is an unsigned integer and comes before whatever is wrong (trailing bytes, a string over the
// limits, a truncated field); nullopt when the bytes do not say it. So that a malformed request
// is refused under its own id.
std::optional<uint64_t> peek_request_id(std::string_view body);

// A received message: frames [signature][command][body] (a ROUTER's routing-id frame removed).
struct envelope {
  command cmd = command::heartbeat;
  std::string_view body;
};

// Checks the signature, the frame count and the command byte. Another "HEARTH/" signature is
// error_code::version_mismatch (reported in `code`) whatever the other frames; anything else
// wrong is malformed.
struct envelope_error {
  error_code code = error_code::malformed;
  std::string message;
};
struct envelope_result {
  bool ok = false;
  envelope env;
  envelope_error err;
};
envelope_result open_envelope(std::span<const std::string_view> frames);

#define HEARTH_WIRE_DECLARE(M)                     \
  extern template std::string encode<M>(const M&); \
  extern template result<M> decode<M>(std::string_view body);
HEARTH_WIRE_MESSAGES(HEARTH_WIRE_DECLARE)
#undef HEARTH_WIRE_DECLARE

}  // namespace hearth::wire
