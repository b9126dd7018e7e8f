#include "client/connection.h"

#include <stdexcept>

#include "schema/zmq-io.h"

namespace hearth::client {

zmq::socket_t dealer_open(zmq::context_t& ctx, const net::curve_client_keys& keys) {
  zmq::socket_t s = net::make_socket(ctx, zmq::socket_type::dealer);
  net::curve_client_apply(s, keys);
  return s;
}

void dealer_connect(zmq::socket_t& s, const std::string& endpoint) {
  try {
    s.connect(endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot connect to the broker at '" + endpoint + "': " + e.what() +
                             " (expected an endpoint such as tcp://host:5555)");
  }
}

bool request_send(zmq::socket_t& s, wire::command cmd, std::string_view body) {
  return net::send_raw(s, {}, cmd, body);
}

// net::send_raw may block on the first frame: a broker that is away for long fills the
// socket's queue.
bool request_send_now(zmq::socket_t& s, wire::command cmd, std::string_view body) {
  const char code = char(uint8_t(cmd));
  try {
    if (!net::send_part(s, zmq::buffer(wire::signature),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return false;
    // The rest of a multipart message is queued with its first part.
    net::send_part(s, zmq::buffer(&code, 1), zmq::send_flags::sndmore);
    net::send_part(s, zmq::buffer(body), zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t&) {
    return false;
  }
}

}  // namespace hearth::client
