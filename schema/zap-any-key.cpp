#include "schema/zap-any-key.h"

#include <array>
#include <string>
#include <vector>

#include "schema/zmq-io.h"

namespace hearth::net {
namespace {

std::string frame_text(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

zmq::socket_t zap_bind(zmq::context_t& ctx) {
  zmq::socket_t zap(ctx, zmq::socket_type::rep);
  zap.set(zmq::sockopt::linger, 0);
  zap.bind("inproc://zeromq.zap.01");
  return zap;
}

void zap_answer_any_curve_key(zmq::socket_t& zap, int max) {
  for (int i = 0; i < max; ++i) {
    std::vector<zmq::message_t> req;
    zmq::message_t part;
    if (!recv_part(zap, part, zmq::recv_flags::dontwait)) return;
    while (true) {
      const bool more = part.more();
      req.push_back(std::move(part));
      if (!more || req.size() > 16) break;
      part = zmq::message_t();
      (void)recv_part(zap, part, zmq::recv_flags::none);
    }
    std::string status = "400", user_id;
    if (req.size() >= 7 && frame_text(req[0]) == "1.0" && frame_text(req[5]) == "CURVE" &&
        req[6].size() == 32) {
      std::array<char, 41> z85{};
      zmq_z85_encode(z85.data(), static_cast<const uint8_t*>(req[6].data()), 32);
      user_id.assign(z85.data(), 40);
      status = "200";
    }
    const std::string version = "1.0", id = req.size() > 1 ? frame_text(req[1]) : "";
    const std::string text = status == "200" ? "OK" : "CURVE only";
    send_part(zap, zmq::buffer(version), zmq::send_flags::sndmore);
    send_part(zap, zmq::buffer(id), zmq::send_flags::sndmore);
    send_part(zap, zmq::buffer(status), zmq::send_flags::sndmore);
    send_part(zap, zmq::buffer(text), zmq::send_flags::sndmore);
    send_part(zap, zmq::buffer(user_id), zmq::send_flags::sndmore);
    send_part(zap, zmq::const_buffer(), zmq::send_flags::none);
  }
}

}  // namespace hearth::net
