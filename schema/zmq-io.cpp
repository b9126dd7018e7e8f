#include "schema/zmq-io.h"

namespace hearth::net {

zmq::socket_t make_socket(zmq::context_t& ctx, zmq::socket_type type) {
  zmq::socket_t s(ctx, type);
  s.set(zmq::sockopt::maxmsgsize, wire::max_message_bytes);
  s.set(zmq::sockopt::linger, 0);
  // Streams are bursty; the default high-water mark of 1000 messages would drop token chunks
  // to a slow client long before memory matters.
  s.set(zmq::sockopt::sndhwm, 100000);
  s.set(zmq::sockopt::rcvhwm, 100000);
  return s;
}

std::vector<std::string_view> received::views() const {
  std::vector<std::string_view> v;
  v.reserve(frames.size());
  for (const auto& f : frames) v.emplace_back(static_cast<const char*>(f.data()), f.size());
  return v;
}

namespace {
// Makes `call` again for as long as a signal interrupts it (zmq-io.h says why).
template <class F>
auto again_on_eintr(F&& call) {
  while (true) {
    try {
      return call();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}
}  // namespace

std::optional<size_t> recv_part(zmq::socket_t& s, zmq::message_t& part, zmq::recv_flags flags) {
  return again_on_eintr([&] { return s.recv(part, flags); });
}

bool send_part(zmq::socket_t& s, zmq::const_buffer frame, zmq::send_flags flags) {
  return again_on_eintr([&] { return s.send(frame, flags).has_value(); });
}

std::optional<received> try_recv(zmq::socket_t& s, bool router) {
  received r;
  zmq::message_t part;
  if (!recv_part(s, part, zmq::recv_flags::dontwait)) return std::nullopt;
  bool first = true;
  while (true) {
    const bool more = part.more();
    if (first && router) {
      r.routing_id.assign(static_cast<const char*>(part.data()), part.size());
    } else {
      if (r.frames.empty()) {
        // Metadata travels with every frame that came over a connection; zmq_msg_gets fails
        // (and returns null) when there is none.
        if (const char* uid = zmq_msg_gets(part.handle(), "User-Id")) r.user_id = uid;
        if (const char* addr = zmq_msg_gets(part.handle(), "Peer-Address")) r.peer_address = addr;
      }
      r.frames.push_back(std::move(part));
    }
    first = false;
    if (!more) break;
    part = zmq::message_t();
    // The rest of a multipart message is always there once its first part arrived.
    (void)recv_part(s, part, zmq::recv_flags::none);
  }
  return r;
}

bool send_raw(zmq::socket_t& s, std::string_view routing_id, wire::command cmd,
              std::string_view body, std::optional<std::string_view> payload) {
  try {
    if (!routing_id.empty()) {
      if (!send_part(s, zmq::buffer(routing_id),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait))
        return false;
    }
    const char code = char(uint8_t(cmd));
    send_part(s, zmq::buffer(wire::signature), zmq::send_flags::sndmore);
    send_part(s, zmq::buffer(&code, 1), zmq::send_flags::sndmore);
    send_part(s, zmq::buffer(body), payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload) send_part(s, zmq::buffer(*payload), zmq::send_flags::none);
    return true;
  } catch (const zmq::error_t&) {
    return false;
  }
}

void poll(zmq::pollitem_t* items, size_t n, std::chrono::milliseconds timeout) {
  try {
    zmq::poll(items, n, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    for (size_t i = 0; i < n; ++i) items[i].revents = 0;
  }
}

int64_t wall_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace hearth::net
