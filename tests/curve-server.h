// A stand-in for a broker running CURVE, for tests of the peer side without the real broker: a
// ROUTER with curve_server on a loopback port, and a ZAP handler (ZeroMQ RFC 27) in the same
// process answering every request with one status. Header-only so that hearth_testing does not
// depend on ZeroMQ.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "schema/curve-cert.h"

namespace hearth::testing {

inline bool poll_in(zmq::socket_t& s, std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, timeout);
  return (item.revents & ZMQ_POLLIN) != 0;
}

// A ROUTER running CURVE with `server`'s keys on a free loopback port. Without a zap_handler in
// its context every client key is accepted.
struct curve_server {
  zmq::socket_t sock;
  std::string endpoint;
  curve_server(zmq::context_t& ctx, const net::curve_cert& server)
      : sock(ctx, zmq::socket_type::router) {
    sock.set(zmq::sockopt::curve_server, 1);
    sock.set(zmq::sockopt::curve_secretkey, server.secret_key);
    sock.set(zmq::sockopt::linger, 0);
    sock.bind("tcp://127.0.0.1:*");
    endpoint = sock.get(zmq::sockopt::last_endpoint);
  }
};

// Answers every ZAP request of its context with `status` (200 allows, 400 refuses), which the
// test may change while it runs (an admin adding a key).
class zap_handler {
 public:
  zap_handler(zmq::context_t& ctx, int status)
      : sock_(ctx, zmq::socket_type::rep), status_(status) {
    sock_.set(zmq::sockopt::linger, 0);
    sock_.bind("inproc://zeromq.zap.01");
    thread_ = std::thread([this] { serve(); });
  }
  ~zap_handler() {
    stop_ = true;
    thread_.join();
  }
  void set_status(int status) { status_ = status; }
  int requests() const { return requests_; }
  zap_handler(const zap_handler&) = delete;
  zap_handler& operator=(const zap_handler&) = delete;

 private:
  void serve() {
    while (!stop_) {
      if (!poll_in(sock_, std::chrono::milliseconds(20))) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(sock_, std::back_inserter(req)) || req.size() < 2) continue;
      const std::string version = req[0].to_string(), id = req[1].to_string();
      const std::string status = std::to_string(status_.load());
      const std::string text = status == "200" ? "OK" : "refused";
      ++requests_;
      std::vector<zmq::const_buffer> rep = {zmq::buffer(version), zmq::buffer(id),
                                            zmq::buffer(status),  zmq::buffer(text),
                                            zmq::str_buffer(""),  zmq::str_buffer("")};
      zmq::send_multipart(sock_, rep);
    }
  }
  zmq::socket_t sock_;
  std::atomic<int> status_;
  std::atomic<int> requests_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hearth::testing
