#include "broker/zap-handler.h"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>

#include "schema/zmq-io.h"

namespace hearth::broker {

namespace {
constexpr int k_requests_per_serve = 256;

std::string frame_string(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}
}  // namespace

zap_handler::zap_handler(zmq::context_t& ctx, allow_list& keys, zmq::socket_t& router,
                         uint32_t max_per_address, refusal_fn on_refusal)
    : keys_(keys),
      rep_(ctx, zmq::socket_type::rep),
      monitor_(ctx, router,
               ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                   ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL),
      max_per_address_(max_per_address),
      on_refusal_(std::move(on_refusal)) {
  rep_.set(zmq::sockopt::linger, 0);
  rep_.bind("inproc://zeromq.zap.01");
}

namespace {
// The peer's IP address of a connected TCP descriptor, as ZAP requests name it ("" if unknown).
std::string peer_ip(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&a)->sin_addr, buf, sizeof buf);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}
}  // namespace

uint32_t zap_handler::authenticated_from(const std::string& address) const {
  auto it = addresses_.find(address);
  return it == addresses_.end() ? 0 : it->second.authenticated;
}

void zap_handler::read_events() {
  // The value of ACCEPTED and DISCONNECTED is the connection's descriptor (their endpoint is the
  // listening one, so the peer's address is read from the descriptor).
  while (const auto e = monitor_.next()) {
    const bool after_failed_handshake = handshake_failed_;
    handshake_failed_ = e->event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL ||
                        e->event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
    const int fd = int(e->value);
    if (e->event == ZMQ_EVENT_ACCEPTED) {
      std::string ip = peer_ip(fd);
      address_counts& a = addresses_[ip];
      ++a.open;
      open_[fd] = {std::move(ip), a.answers};
    } else if (e->event == ZMQ_EVENT_DISCONNECTED) {
      auto it = open_.find(fd);
      if (it == open_.end()) continue;
      auto at = addresses_.find(it->second.address);
      address_counts& a = at->second;
      const bool answered = a.answers != it->second.answers_at_accept && !after_failed_handshake;
      if (answered && a.refused > 0) {
        --a.refused;
      } else if (answered && a.authenticated > 0) {
        --a.authenticated;
      }
      --a.open;
      // A connection let in whose handshake then failed (the peer left before READY) is taken
      // back here, when it is the last: no address counts more than it has open.
      a.authenticated = std::min(a.authenticated, a.open);
      if (a.open == 0) addresses_.erase(at);
      open_.erase(it);
    }
  }
}

void zap_handler::serve() {
  read_events();
  for (int i = 0; i < k_requests_per_serve; ++i) {
    std::vector<zmq::message_t> request;
    zmq::message_t part;
    if (!net::recv_part(rep_, part, zmq::recv_flags::dontwait)) return;
    while (true) {
      const bool more = part.more();
      request.push_back(std::move(part));
      if (!more || request.size() > 16) break;
      part = zmq::message_t();
      (void)net::recv_part(rep_, part, zmq::recv_flags::none);
    }
    // The connection's ACCEPTED came before its request: read, so that it is counted.
    read_events();
    answer(request);
  }
}

void zap_handler::answer(const std::vector<zmq::message_t>& req) {
  // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
  std::string status = "400", text = "not allowed", user_id;
  const std::string request_id = req.size() > 1 ? frame_string(req[1]) : "";
  const std::string address = req.size() > 3 ? frame_string(req[3]) : "?";
  if (req.size() < 6 || frame_string(req[0]) != "1.0") {
    status = "500";
    text = "malformed ZAP request";
  } else if (frame_string(req[5]) != "CURVE" || req.size() < 7 || req[6].size() != 32) {
    text = "this broker accepts CURVE only";
    log_refusal("no_curve", "-", address, "it did not use CURVE");
  } else {
    std::array<char, 41> z85{};
    zmq_z85_encode(z85.data(), static_cast<const uint8_t*>(req[6].data()), 32);
    const std::string key(z85.data(), 40);
    const allowed_key* k = keys_.find(key);
    if (!k) {
      keys_.refresh_if_changed();
      k = keys_.find(key);
    }
    const uint32_t from_here = authenticated_from(address);
    if (k && k->role != peer_role::admin && from_here >= max_per_address_) {
      text = "too many connections from this address";
      log_refusal("address_cap", key, address,
                  std::to_string(from_here) + " authenticated connections from this address, " +
                      "max_connections_per_address (" + std::to_string(max_per_address_) +
                      "); admin keys still get in");
    } else if (k) {
      status = "200";
      text = "OK";
      user_id = key;
      if (auto a = addresses_.find(address); a != addresses_.end()) ++a->second.authenticated;
      spdlog::debug("auth: {} key '{}' connected from {} ({} authenticated connections from there)",
                    peer_role_name(k->role), k->name, address, from_here + 1);
    } else {
      log_refusal("unknown_key", key, address,
                  "the key is not in nodes/, clients/ or admins/ of " + keys_.dir());
    }
  }
  // Counted only for an address with a connection open (a request outlives no connection).
  if (auto a = addresses_.find(address); a != addresses_.end()) {
    ++a->second.answers;
    if (status != "200") ++a->second.refused;
  }
  const std::string version = "1.0";
  net::send_part(rep_, zmq::buffer(version), zmq::send_flags::sndmore);
  net::send_part(rep_, zmq::buffer(request_id), zmq::send_flags::sndmore);
  net::send_part(rep_, zmq::buffer(status), zmq::send_flags::sndmore);
  net::send_part(rep_, zmq::buffer(text), zmq::send_flags::sndmore);
  net::send_part(rep_, zmq::buffer(user_id), zmq::send_flags::sndmore);
  net::send_part(rep_, zmq::const_buffer(), zmq::send_flags::none);  // no metadata
}

void zap_handler::log_refusal(const char* reason, const std::string& key,
                              const std::string& address, const std::string& why) {
  if (on_refusal_) on_refusal_(reason);
  if (auto more = refusal_log_.admit(net::steady::now())) {
    spdlog::warn("auth: refused a peer from {} with key {}: {}{}", address, key, why, *more);
  }
}

}  // namespace hearth::broker
