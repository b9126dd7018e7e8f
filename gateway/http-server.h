// The HTTP/1.1 server under the gateway: Boost.Beast on one Asio I/O thread, so thousands of
// concurrent streaming connections cost a socket and a buffer each, not a thread. Plain HTTP or
// TLS (OpenSSL); keep-alive; CORS. Every per-connection resource is bounded
// (gateway_options): header and body size, the time to send a request, idle keep-alive, a write
// that stalls, unsent bytes of a stream, and the number of connections.
//
// For each request: CORS preflight (OPTIONS) answered here; the route looked up (404 / 405 in
// OpenAI's error shape); the body limit checked (413) before the body is read; then, unless the
// route is public, `authenticate` says who the caller is (or answers the error itself, e.g.
// 401), and the route's handler runs. The Beast types stay inside http-server.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "gateway/gateway.h"
#include "gateway/router.h"

namespace hearth::gateway {

// Says who sent `request` by calling `done` (on the I/O thread) with the caller, or with an
// error response (then the handler does not run).
using authenticate_fn = std::function<void(
    const http_request& request, std::function<void(const caller*, http_response error)> done)>;

class http_server {
 public:
  // Checks the TLS files and the listen address; throws std::runtime_error naming what is wrong.
  http_server(const gateway_options& o, const router& routes, authenticate_fn authenticate);
  ~http_server();

  // Functions run on the I/O thread: post() soon, after() once `delay` has passed. Safe to call
  // from any thread.
  void post(std::function<void()> f);
  void after(std::chrono::milliseconds delay, std::function<void()> f);

  // Binds (throws when it cannot) and serves until `stop` becomes true; open connections are
  // closed on the way out.
  void run(const std::atomic<bool>& stop);
  bool bound() const;
  uint16_t port() const;  // the bound port (0 before)
  size_t connections() const;
  // Answers sent, by status code (an event stream counts as a 200). I/O thread only.
  const std::map<int, uint64_t>& responses() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hearth::gateway
