// hearth-gateway: the homelab behind the OpenAI HTTP API. An HTTP server (Boost.Beast, one I/O
// thread for every connection) whose handlers are clients of the broker through one broker_link;
// batches and uploaded files are kept in the gateway's own SQLite file. Runs as its own daemon
// (gateway/main.cpp) and inside `hearth up --http` (tools/cmd-up.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gateway/batch-store.h"
#include "gateway/broker-link.h"
#include "gateway/dashboard-files.h"

namespace hearth::gateway {

struct gateway_options {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT
  std::string broker = "tcp://127.0.0.1:5555";
  std::string broker_key;  // the broker's public certificate ("" = no CURVE)
  std::string key;         // the gateway's own secret certificate (a client or admin key)
  // Listening anywhere but loopback needs API keys on every request, unless this is set.
  bool insecure = false;
  std::string tls_cert, tls_key;  // PEM files; both or neither (then plain HTTP)
  // Origins allowed by CORS: none by default, "*" for any.
  std::vector<std::string> cors_origins;
  // Where no API key is required (keys_required false), requests must name in Host an IP
  // address, localhost, or one of these (HOST or HOST:PORT; "*" for any), and a browser's
  // request from another origin must be allowed by cors_origins: a web page cannot drive the
  // gateway, by its own origin or by DNS rebinding.
  std::vector<std::string> allowed_hosts;
  std::string db = "gateway.db";             // batches and uploaded files
  uint64_t max_body_bytes = 8ull << 20;      // requests other than file uploads
  uint64_t max_upload_bytes = 256ull << 20;  // POST /v1/files
  // A batch's output file: a response that would make it longer goes to the error file instead,
  // naming its job (whose output the broker's history keeps). At most max_file_bytes.
  uint64_t max_batch_output_bytes = max_file_bytes;
  // Connections at once, in all and from one client address. Past either bound the oldest
  // connection that has not sent a whole request yet (of that address, or of all) is closed to
  // make room, so that a flood of idle or half-sent connections cannot lock clients out; with
  // none such, the new one is refused (503) and closed.
  uint32_t max_connections = 4096;
  uint32_t max_connections_per_address = 512;
  // Request bodies held at once by all connections together (each counted at its Content-Length,
  // or its route's limit when chunked, from its headers until it is answered): one more is
  // answered 503, so a flood of large uploads cannot take the gateway's memory.
  uint64_t max_total_body_bytes = 1ull << 30;
  std::chrono::milliseconds header_timeout{10000};  // to receive a request's headers and body
  // To receive a request's headers: from the connection's start for its first request (the TLS
  // handshake included), from its first byte for a later one. A slowloris client is cut here.
  std::chrono::milliseconds headers_timeout{5000};
  std::chrono::milliseconds idle_timeout{60000};   // a keep-alive connection with no request
  std::chrono::milliseconds write_timeout{30000};  // a client that takes no bytes for this long
  uint64_t max_unsent_bytes = 4ull << 20;          // a streaming client this far behind is dropped
  // The dashboard's files served under /dashboard/ (hearth-gateway's own, dashboard-files.h);
  // none: GET / says the gateway was built without it.
  std::span<const dashboard_file> dashboard;
  // Clients of GET /v1/hearth/live (open dashboards) at once; one more is answered 503.
  uint32_t max_live_subscribers = 64;
};

// Whether HOST:PORT can only be reached from this machine (127.0.0.0/8, ::1, localhost).
bool listen_is_loopback(const std::string& listen);
// Whether every request needs an API key: listening beyond loopback, unless insecure.
bool keys_required(const gateway_options& o);

// What route handlers use besides the request: the broker, timers, the options.
class gateway_services {
 public:
  virtual ~gateway_services() = default;
  virtual broker_link& broker() = 0;
  // Runs `f` on the I/O thread after `delay`.
  virtual void after(std::chrono::milliseconds delay, std::function<void()> f) = 0;
  virtual const gateway_options& options() const = 0;
  // The HTTP server's own figures, for /metrics (I/O thread only).
  virtual size_t http_connections() const = 0;
  virtual const std::map<int, uint64_t>& http_responses() const = 0;
};

class router;

// Adds routes to `r`. What it returns lives as long as the gateway (the batch service, say).
// gateway/routes.h has the one that adds every route the gateway serves.
using route_installer = std::function<std::shared_ptr<void>(router& r, gateway_services& s)>;

class gateway {
 public:
  // Checks the options (TLS files load, the listen address parses, API keys needed unless
  // loopback or insecure) and connects to the broker; throws std::runtime_error naming what is
  // wrong. /health is always served; `install` adds the rest.
  gateway(gateway_options o, const route_installer& install);
  ~gateway();
  // Binds, then serves until `stop` becomes true (checked at least every 100 ms).
  void run(const std::atomic<bool>& stop);
  // The bound port (after run() has bound; 0 before): --listen HOST:0 picks a free one.
  uint16_t port() const;
  bool bound() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hearth::gateway
