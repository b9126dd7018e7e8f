#include "client/broker-client.h"

#include <random>

#include "client/connection.h"
#include "client/protocol.h"
#include "schema/endpoint.h"

namespace hearth::client {

broker_client::broker_client(const broker_options& o, std::chrono::milliseconds timeout)
    : broker_client(broker_endpoint(o.endpoint), broker_keys(o.broker_key, o.key), timeout) {}

namespace {

// The endpoint, checked before ZeroMQ sees it (schema/endpoint.h).
std::string checked_endpoint(std::string endpoint) {
  if (auto r = net::endpoint_check(endpoint); !r) throw std::runtime_error(r.message());
  if (auto r = net::endpoint_host_check(endpoint); !r) throw std::runtime_error(r.message());
  return endpoint;
}

}  // namespace

broker_client::broker_client(std::string endpoint, net::curve_client_keys keys,
                             std::chrono::milliseconds timeout)
    : endpoint_(checked_endpoint(std::move(endpoint))),
      keys_(std::move(keys)),
      timeout_(timeout),
      // A random start keeps a reply meant for an earlier `hearth` process (same routing id is
      // impossible, but a confused broker is not) from matching one of ours.
      next_request_id_(uint64_t(std::random_device{}() & 0x7fffffff) + 1),
      ctx_(1) {
  connect();
}

void broker_client::connect() {
  socket_ = dealer_open(ctx_, keys_);
  monitor_ = std::make_unique<net::handshake_monitor>(ctx_, socket_);
  disconnects_seen_ = 0;
  dealer_connect(socket_, endpoint_);
}

void broker_client::send_request(wire::command cmd, std::string body) {
  // Without ZMQ_IMMEDIATE a connecting DEALER queues the message, so this fails only on a
  // closed socket; a broker that is not there shows up as a missing reply.
  if (!request_send(socket_, cmd, body)) {
    throw std::runtime_error("cannot send " + std::string(wire::command_name(cmd)) +
                             " to the broker at " + endpoint_);
  }
}

void broker_client::reconnect() {
  connected_before_ = ever_connected();
  handshake_before_ = handshake_before_ || monitor_->succeeded();
  monitor_.reset();  // before the socket it watches
  socket_.close();   // linger 0 (net::make_socket): unsent requests go with it
  events_.clear();
  connect();
}

bool broker_client::connection_dropped() {
  monitor_->update();
  if (monitor_->disconnects() == disconnects_seen_) return false;
  disconnects_seen_ = monitor_->disconnects();
  return true;
}

bool broker_client::ever_connected() {
  monitor_->update();
  return connected_before_ || monitor_->connected();
}

std::optional<net::received> broker_client::receive(net::steady::time_point deadline,
                                                    bool until_dropped,
                                                    const std::function<bool()>& stop) {
  while (true) {
    monitor_->update();
    check_handshake();
    if (until_dropped && monitor_->disconnects() != disconnects_seen_) return std::nullopt;
    if (auto msg = net::try_recv(socket_, false)) {
      const auto views = msg->views();
      auto env = wire::open_envelope(views);
      if (!env.ok) {
        if (env.err.code == wire::error_code::version_mismatch) {
          throw std::runtime_error("the broker at " + endpoint_ +
                                   " speaks another protocol version: " + env.err.message);
        }
        throw std::runtime_error("malformed message from the broker at " + endpoint_ + ": " +
                                 env.err.message);
      }
      return msg;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - net::steady::now());
    if (left.count() <= 0) return std::nullopt;
    // `stop` (the CLI's Ctrl-C) ends a wait for events, never one for a reply.
    if (until_dropped && stop && stop()) return std::nullopt;
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                               {monitor_->events().handle(), 0, ZMQ_POLLIN, 0}};
    net::poll(items, 2, left);
  }
}

net::received broker_client::await_reply(wire::command cmd, uint64_t request_id) {
  const auto deadline = net::steady::now() + timeout_;
  while (true) {
    auto msg = receive(deadline);
    if (!msg) throw_timeout();
    const auto views = msg->views();
    const auto got = wire::command(uint8_t(views[1][0]));
    const std::string_view body = views[2];
    if (is_job_event(got)) {
      events_.push_back(std::move(*msg));
    } else if (got == wire::command::error) {
      auto e = wire::decode<wire::error_reply>(body);
      if (!e) throw_malformed(got, e.message());
      // request_id 0: the broker could not read our request far enough to echo it.
      if (e->request_id == request_id || e->request_id == 0)
        throw broker_error(e->code, e->message);
    } else if (got == cmd) {
      auto id = reply_request_id(body);
      if (!id) throw_malformed(got, id.message());
      if (*id == request_id) return std::move(*msg);
    }
    // Anything else answers an earlier request (or is a heartbeat): not ours to act on.
  }
}

std::optional<net::received> broker_client::next_event(std::chrono::milliseconds timeout,
                                                       const std::function<bool()>& stop) {
  if (!events_.empty()) {
    net::received msg = std::move(events_.front());
    events_.pop_front();
    return msg;
  }
  const auto deadline = net::steady::now() + timeout;
  while (auto msg = receive(deadline, true, stop)) {
    const auto views = msg->views();
    const auto got = wire::command(uint8_t(views[1][0]));
    if (is_job_event(got)) return msg;
    if (got == wire::command::error) {
      auto e = wire::decode<wire::error_reply>(views[2]);
      if (!e) throw_malformed(got, e.message());
      if (e->request_id == 0) return msg;
    }
  }
  return std::nullopt;
}

void broker_client::throw_malformed(wire::command cmd, const std::string& why) const {
  throw std::runtime_error("malformed " + std::string(wire::command_name(cmd)) +
                           " from the broker at " + endpoint_ + ": " + why);
}

void broker_client::throw_key_refused(const net::handshake_failure& f) const {
  throw std::runtime_error(
      "the broker at " + endpoint_ +
      " refused this client's key (handshake failed: " + net::handshake_failure_text(f) + ")");
}

void broker_client::throw_no_curve_answer(const net::handshake_failure* f) const {
  const std::string detail = f ? "handshake failed: " + net::handshake_failure_text(*f) + "; " : "";
  throw std::runtime_error("the broker at " + endpoint_ + " did not answer a CURVE handshake (" +
                           detail + "is it running with --auth? is --broker-key its key?)");
}

void broker_client::check_handshake() {
  const auto& f = monitor_->failure();
  if (!f) return;
  if (keys_.enabled() && f->kind == net::handshake_failure_kind::auth) throw_key_refused(*f);
  if (keys_.enabled() && f->mechanism_mismatch()) throw_no_curve_answer(&*f);
  if (!keys_.enabled() && f->mechanism_mismatch()) {
    throw std::runtime_error("the broker at " + endpoint_ +
                             " runs CURVE and this client has no keys (give --broker-key and "
                             "--key, or set HEARTH_BROKER_KEY and HEARTH_KEY)");
  }
}

void broker_client::throw_timeout() const {
  const auto ms = timeout_.count();
  const std::string limit =
      ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  const auto& f = monitor_->failure();
  if (keys_.enabled() && f && f->kind == net::handshake_failure_kind::protocol &&
      !f->mechanism_mismatch()) {
    throw_key_refused(*f);
  }
  if (keys_.enabled() && monitor_->connected() && !monitor_->succeeded() && !handshake_before_) {
    // A wrong broker key shows as the broker closing the connection (no detail): the handshake
    // never got going. Without any connection the broker is simply not there: the message below.
    // Once these keys have completed a handshake with this broker, such a close is the broker
    // going away instead: a dying process's listening socket still takes connections into its
    // backlog and resets them when it is gone (seen under AddressSanitizer, whose processes take
    // long to exit), so it is waited out like a broker that does not answer.
    throw_no_curve_answer(f ? &*f : nullptr);
  }
  if (!monitor_->connected() && !connected_before_) {
    throw broker_timeout("nothing answers at " + endpoint_ + " (no connection within " + limit +
                         ": is hearth-broker running there? set --broker or HEARTH_BROKER)");
  }
  throw broker_timeout("no reply from the broker at " + endpoint_ + " within " + limit +
                       " (is hearth-broker running? set --broker or HEARTH_BROKER)");
}

}  // namespace hearth::client
