#include "broker/router-send.h"

#include "schema/zmq-io.h"

namespace hearth::broker {

send_status router_send(zmq::socket_t& router, std::string_view routing_id, wire::command cmd,
                        std::string_view body) {
  try {
    if (!net::send_part(router, zmq::buffer(routing_id),
                        zmq::send_flags::sndmore | zmq::send_flags::dontwait))
      return send_status::would_block;
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return send_status::unreachable;
    throw;
  }
  const char code = char(uint8_t(cmd));
  net::send_part(router, zmq::buffer(wire::signature), zmq::send_flags::sndmore);
  net::send_part(router, zmq::buffer(&code, 1), zmq::send_flags::sndmore);
  net::send_part(router, zmq::buffer(body), zmq::send_flags::none);
  return send_status::sent;
}

}  // namespace hearth::broker
