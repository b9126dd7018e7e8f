// The CLI's side of the client protocol (schema/messages.h): one DEALER socket to the broker,
// requests matched to their replies by request_id, and job events kept in arrival order for the
// command that streams them. One broker_client per command; it belongs to one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "schema/curve-cert.h"
#include "schema/handshake-monitor.h"
#include "schema/zmq-io.h"

namespace hearth::cli {

inline constexpr std::string_view broker_endpoint_default = "tcp://127.0.0.1:5555";

// The broker to talk to: `flag` (--broker) when set, else $HEARTH_BROKER, else the default.
std::string broker_endpoint(std::string_view flag);

// Where the CLI looks for its keys by default: $XDG_CONFIG_HOME/hearth, else ~/.config/hearth;
// empty when neither variable is set.
std::string client_config_dir();

// The CURVE keys to talk to the broker with: the files `broker_key_flag` (--broker-key, the
// broker's public certificate) and `key_flag` (--key, this client's secret certificate), each
// else $HEARTH_BROKER_KEY / $HEARTH_KEY. When neither is given: $XDG_CONFIG_HOME/hearth/broker.pub
// and client.key (XDG_CONFIG_HOME defaults to ~/.config) when both files exist, else no keys
// (plain ZMTP). Throws std::runtime_error when only one is given or a file does not load.
net::curve_client_keys broker_keys(std::string_view broker_key_flag, std::string_view key_flag);

// What a broker command's flags say about the broker: --broker, --broker-key and --key, each
// empty when not given (broker_endpoint() and broker_keys() resolve them).
struct broker_options {
  std::string endpoint;
  std::string broker_key;
  std::string key;
};

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
// that a broker gone away gets (tools/broker-retry.h).
class broker_unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class broker_client {
 public:
  broker_client(std::string endpoint, net::curve_client_keys keys,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // The broker and keys `o` resolves to.
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
  // error_reply not answering a request), waiting up to `timeout`; nullopt when none came, or
  // as soon as the connection dropped (connection_dropped()). The message's envelope has been
  // checked: views() are [signature][command][body].
  std::optional<net::received> next_event(std::chrono::milliseconds timeout);

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
  // `until_dropped`, before the connection dropped).
  std::optional<net::received> receive(net::steady::time_point deadline,
                                       bool until_dropped = false);
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

}  // namespace hearth::cli
