// The blocking face of the client library (the CLI's): one DEALER socket to the broker, requests
// matched to their replies by request_id (client/protocol.h), job events kept in arrival order for
// whoever streams them, and a fresh socket on demand (reconnect: the Lazy Pirate pattern). One
// broker_client per command; it belongs to one thread. Trying again is broker-retry.h's,
// following a job across reconnects follow-job.h's; the asynchronous face is broker-link.h.
//
//   client::broker_client c(client::broker_options{});        // $HEARTH_BROKER, keys from
//   ~/.config auto r = c.request<wire::nodes_reply>(wire::list_nodes{});  // throws on error or
//   timeout
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <zmq.hpp>

#include "client/client-config.h"
#include "schema/codec.h"
#include "schema/curve-cert.h"
#include "schema/handshake-monitor.h"
#include "schema/zmq-io.h"

namespace hearth::client {

// The broker answered with error_reply: its code tells whether trying again can help
// (storage_unavailable: nothing was kept, retry later).
class broker_error : public std::runtime_error {
 public:
  broker_error(wire::error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  wire::error_code code() const { return code_; }

 private:
  wire::error_code code_;
};

// No reply within the timeout from a broker that is not refusing us: it is down, restarting or
// overloaded, and asking again later may get through.
class broker_timeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Nothing at the broker's address accepted a connection while the command tried (a wrong
// address, a broker that is not running): final, told at once rather than after the long retry
// that a broker gone away gets (client/broker-retry.h).
class broker_unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class broker_client {
 public:
  // Checks the endpoint (schema/endpoint.h) and connects; throws std::runtime_error saying why
  // when it cannot.
  broker_client(std::string endpoint, net::curve_client_keys keys,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // The broker and keys `o` resolves to (client/client-config.h).
  explicit broker_client(const broker_options& o,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5));

  const std::string& endpoint() const { return endpoint_; }

  // Sends `req` under a fresh request_id and returns the broker's Reply to it. Throws
  // broker_error with the broker's message on error_reply, broker_timeout when no reply comes
  // within the timeout, std::runtime_error when the handshake was refused. Job events that arrive
  // meanwhile are kept for next_event().
  template <class Reply, class Request>
  Reply request(Request req) {
    req.request_id = next_request_id_++;
    send_request(Request::cmd, wire::encode(req));
    const net::received msg = await_reply(Reply::cmd, req.request_id);
    auto r = wire::decode<Reply>(msg.views()[2]);
    if (!r) throw_malformed(Reply::cmd, r.message());
    return std::move(r).value();
  }

  // The next job event (job_queued, job_running, job_tokens, job_restarted, job_done, or an
  // error_reply not answering a request), waiting up to `timeout`; nullopt when none came, as
  // soon as the connection dropped (connection_dropped()), or as soon as `stop` (when given, e.g.
  // "Ctrl-C was pressed") returns true. The message's envelope has been checked: views() are
  // [signature][command][body].
  std::optional<net::received> next_event(std::chrono::milliseconds timeout,
                                          const std::function<bool()>& stop = {});

  // The connection to the broker was made and then lost since the last reconnect() (the broker
  // died or restarted; ZeroMQ connects again by itself, but a restarted broker forgot what we
  // asked of it).
  bool connection_dropped();
  // A TCP connection to the broker's address was made at some time since this client began,
  // over every reconnect(): something listens there (a broker starting, restarting or busy),
  // as opposed to nothing at all.
  bool ever_connected();
  // A fresh socket to the same broker (the Lazy Pirate pattern): what the old one still queued
  // or received is dropped, so a request tried again is never sent twice by the same client.
  void reconnect();

 private:
  void send_request(wire::command cmd, std::string body);
  // Receives until the reply of type `cmd` to `request_id` arrives; see request().
  net::received await_reply(wire::command cmd, uint64_t request_id);
  // One message with a valid envelope, or nullopt when none came before `deadline` (or, with
  // `until_dropped`, before the connection dropped or `stop` said so).
  std::optional<net::received> receive(net::steady::time_point deadline, bool until_dropped = false,
                                       const std::function<bool()>& stop = {});
  void connect();
  [[noreturn]] void throw_malformed(wire::command cmd, const std::string& why) const;
  [[noreturn]] void throw_timeout() const;
  [[noreturn]] void throw_key_refused(const net::handshake_failure& f) const;
  [[noreturn]] void throw_no_curve_answer(const net::handshake_failure* f) const;
  // Throws when the handshake failed in a way waiting will not mend (a refused key, one side
  // without CURVE); other failures (a wrong broker key) are told when the reply times out.
  void check_handshake();

  std::string endpoint_;
  net::curve_client_keys keys_;
  std::chrono::milliseconds timeout_;
  uint64_t next_request_id_;
  zmq::context_t ctx_;
  zmq::socket_t socket_;
  std::unique_ptr<net::handshake_monitor> monitor_;  // destroyed before socket_
  std::deque<net::received> events_;
  uint64_t disconnects_seen_ = 0;
  bool connected_before_ = false;  // on a socket that reconnect() replaced
  bool handshake_before_ = false;  // a handshake completed on a socket that reconnect() replaced
};

}  // namespace hearth::client
