#include "schema/handshake-monitor.h"

#include <cstring>

namespace hearth::net {
namespace {

std::string protocol_error_text(uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "security mechanism mismatch: one side runs CURVE, the other does not";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "a cryptographic check failed (a wrong key)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE:
      return "the key exchange failed";
    default:
      break;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "protocol error 0x%08x", code);
  return buf;
}

}  // namespace

std::string handshake_failure_text(const handshake_failure& f) {
  switch (f.kind) {
    case handshake_failure_kind::auth: {
      const std::string status = "ZAP status " + std::to_string(f.value);
      if (f.value == 400) return status + " (the key is not allowed)";
      if (f.value == 300) return status + " (a temporary failure of the authenticator)";
      if (f.value == 500) return status + " (the authenticator failed)";
      return status;
    }
    case handshake_failure_kind::protocol:
      return protocol_error_text(f.value);
    case handshake_failure_kind::no_detail:
      break;
  }
  return std::string(std::strerror(int(f.value)));
}

handshake_monitor::handshake_monitor(zmq::context_t& ctx, zmq::socket_t& watched)
    : events_(ctx, watched,
              ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                  ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {}

void handshake_monitor::update() {
  while (const auto e = events_.next()) {
    const uint32_t value = e->value;
    switch (e->event) {
      case ZMQ_EVENT_CONNECTED:
        connected_ = true;
        break;
      case ZMQ_EVENT_DISCONNECTED:
        // One that failed its handshake (the broker was starting) never carried our messages.
        if (up_) ++disconnects_;
        up_ = false;
        break;
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        succeeded_ = true;
        up_ = true;
        failure_.reset();
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        failure_ = handshake_failure{handshake_failure_kind::auth, value};
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        failure_ = handshake_failure{handshake_failure_kind::protocol, value};
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        failure_ = handshake_failure{handshake_failure_kind::no_detail, value};
        break;
      default:
        break;
    }
  }
}

}  // namespace hearth::net
