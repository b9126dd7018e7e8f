#include "broker/zap-handler.h"

#include <spdlog/spdlog.h>

#include <array>

namespace hearth::broker {

namespace {
constexpr uint32_t k_log_burst = 10;
constexpr int k_requests_per_serve = 256;
// An unknown key makes the handler rescan the folders (a certificate copied in a moment ago must
// work at once), but not more often than this, so a stranger knocking fast costs no disk reads.
constexpr auto k_rescan_on_miss = std::chrono::milliseconds(200);

std::string frame_string(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}
}  // namespace

zap_handler::zap_handler(zmq::context_t& ctx, allow_list& keys)
    : keys_(keys), rep_(ctx, zmq::socket_type::rep) {
  rep_.set(zmq::sockopt::linger, 0);
  rep_.bind("inproc://zeromq.zap.01");
}

void zap_handler::serve() {
  for (int i = 0; i < k_requests_per_serve; ++i) {
    std::vector<zmq::message_t> request;
    zmq::message_t part;
    if (!rep_.recv(part, zmq::recv_flags::dontwait)) return;
    while (true) {
      const bool more = part.more();
      request.push_back(std::move(part));
      if (!more || request.size() > 16) break;
      part = zmq::message_t();
      (void)rep_.recv(part, zmq::recv_flags::none);
    }
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
    log_refusal("-", address, "it did not use CURVE");
  } else {
    std::array<char, 41> z85{};
    zmq_z85_encode(z85.data(), static_cast<const uint8_t*>(req[6].data()), 32);
    const std::string key(z85.data(), 40);
    const allowed_key* k = keys_.find(key);
    if (!k && net::steady::now() - last_rescan_ >= k_rescan_on_miss) {
      last_rescan_ = net::steady::now();
      keys_.refresh();
      k = keys_.find(key);
    }
    if (k) {
      status = "200";
      text = "OK";
      user_id = key;
      spdlog::debug("auth: {} key '{}' connected from {}", peer_role_name(k->role), k->name,
                    address);
    } else {
      log_refusal(key, address, "the key is not in nodes/, clients/ or admins/ of " + keys_.dir());
    }
  }
  if (status != "200") ++refused_;
  const std::string version = "1.0";
  rep_.send(zmq::buffer(version), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(status), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(text), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(user_id), zmq::send_flags::sndmore);
  rep_.send(zmq::message_t(), zmq::send_flags::none);  // no metadata
}

void zap_handler::log_refusal(const std::string& key, const std::string& address,
                              const std::string& why) {
  const auto now = net::steady::now();
  if (now - log_window_ >= std::chrono::minutes(1)) {
    if (unlogged_ > 0) spdlog::warn("auth: {} more peers refused in the last minute", unlogged_);
    log_window_ = now;
    logged_in_window_ = 0;
    unlogged_ = 0;
  }
  if (logged_in_window_ < k_log_burst) {
    ++logged_in_window_;
    spdlog::warn("auth: refused a peer from {} with key {}: {}", address, key, why);
  } else {
    ++unlogged_;
  }
}

}  // namespace hearth::broker
