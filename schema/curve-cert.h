// CurveZMQ certificates (RFC 26) in CZMQ's zcert text format, so keys made by `hearth keygen`,
// `zcert`/`curve_keygen` and pyzmq's zmq.auth interoperate. A public certificate holds the Z85
// public key; a secret certificate holds both keys:
//
//   #   ****  Generated on 2026-11-23 22:10:00 by hearth  ****
//   #   ZeroMQ CURVE **Secret** Certificate
//   #   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.
//
//   metadata
//       name = "node-a"
//   curve
//       public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
//       secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
//
// The text is ZPL (ZeroMQ RFC 4): '#' comments, one level of indentation per 4 spaces, `name =
// value` with the value quoted or bare.
#pragma once

#include <string>
#include <zmq.hpp>

#include "common/result.h"

namespace hearth::net {

inline constexpr size_t z85_key_chars = 40;  // a 32-byte key in Z85

struct curve_cert {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty in a public certificate
  std::string name;        // metadata "name" (informational); may be empty
};

// A fresh key pair (zmq_curve_keypair). Fails when libzmq was built without CURVE.
result<curve_cert> curve_cert_generate(std::string name);

// Parses certificate text; `origin` names it in errors. Checks that each key is 40 Z85 characters
// and, when the secret key is present, that the public key is the one derived from it.
result<curve_cert> curve_cert_parse(std::string_view text, const std::string& origin);
// Reads and parses a file (public or secret certificate).
result<curve_cert> curve_cert_load(const std::string& path);
// As curve_cert_load, and fails unless the file holds a secret key.
result<curve_cert> curve_cert_load_secret(const std::string& path);

// The zcert text of the public certificate, and of the secret one (both keys).
std::string curve_cert_public_text(const curve_cert& c);
std::string curve_cert_secret_text(const curve_cert& c);

// Writes DIR/NAME.pub (mode 0644) and DIR/NAME.key (mode 0600), creating DIR. Refuses to
// overwrite an existing file.
result<void> curve_cert_save(const curve_cert& c, const std::string& dir, const std::string& name);

// What a DEALER socket needs to talk to a broker that runs CURVE: the broker's public key and this
// peer's own key pair. Empty (enabled() false) means plain ZMTP (a broker without --auth).
struct curve_client_keys {
  std::string broker_public;
  curve_cert own;
  bool enabled() const { return !broker_public.empty(); }
};

// Loads the broker's public certificate and this peer's secret certificate. Both paths empty:
// empty keys (no CURVE). Exactly one empty: an error naming the missing one.
result<curve_client_keys> curve_client_keys_load(const std::string& broker_key_path,
                                                 const std::string& key_path);

// Sets ZMQ_CURVE_SERVERKEY/PUBLICKEY/SECRETKEY on a socket before it connects; no-op when the
// keys are empty.
void curve_client_apply(zmq::socket_t& s, const curve_client_keys& keys);

}  // namespace hearth::net
