#include "tools/broker-client.h"

#include <cstdlib>
#include <random>

namespace hearth::cli {
namespace {

bool is_job_event(wire::command c) {
  switch (c) {
    case wire::command::job_queued:
    case wire::command::job_running:
    case wire::command::job_tokens:
    case wire::command::job_restarted:
    case wire::command::job_done:
      return true;
    default:
      return false;
  }
}

// The request_id of a reply message of type `cmd`.
result<uint64_t> reply_request_id(wire::command cmd, std::string_view body) {
  auto id = [&](auto tag) -> result<uint64_t> {
    auto r = wire::decode<decltype(tag)>(body);
    if (!r) return r.err();
    return r->request_id;
  };
  switch (cmd) {
    case wire::command::accepted:
      return id(wire::accepted{});
    case wire::command::jobs_reply:
      return id(wire::jobs_reply{});
    case wire::command::job_reply:
      return id(wire::job_reply{});
    case wire::command::nodes_reply:
      return id(wire::nodes_reply{});
    case wire::command::models_reply:
      return id(wire::models_reply{});
    case wire::command::ok:
      return id(wire::ok{});
    default:
      return error{"not a reply"};
  }
}

}  // namespace

std::string broker_endpoint(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  if (const char* env = std::getenv("HEARTH_BROKER"); env && *env) return env;
  return std::string(broker_endpoint_default);
}

broker_client::broker_client(std::string endpoint, std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)),
      timeout_(timeout),
      // A random start keeps a reply meant for an earlier `hearth` process (same routing id is
      // impossible, but a confused broker is not) from matching one of ours.
      next_request_id_(uint64_t(std::random_device{}() & 0x7fffffff) + 1),
      ctx_(1),
      socket_(net::make_socket(ctx_, zmq::socket_type::dealer)) {
  try {
    socket_.connect(endpoint_);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot connect to the broker at '" + endpoint_ + "': " + e.what() +
                             " (expected an endpoint such as tcp://host:5555)");
  }
}

void broker_client::send_request(wire::command cmd, std::string body) {
  // Without ZMQ_IMMEDIATE a connecting DEALER queues the message, so this fails only on a
  // closed socket; a broker that is not there shows up as a missing reply.
  if (!net::send_raw(socket_, {}, cmd, body)) {
    throw std::runtime_error("cannot send " + std::string(wire::command_name(cmd)) +
                             " to the broker at " + endpoint_);
  }
}

std::optional<net::received> broker_client::receive(net::steady::time_point deadline) {
  while (true) {
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
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, left);
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
      if (e->request_id == request_id || e->request_id == 0) throw std::runtime_error(e->message);
    } else if (got == cmd) {
      auto id = reply_request_id(got, body);
      if (!id) throw_malformed(got, id.message());
      if (*id == request_id) return std::move(*msg);
    }
    // Anything else answers an earlier request (or is a heartbeat): not ours to act on.
  }
}

std::optional<net::received> broker_client::next_event(std::chrono::milliseconds timeout) {
  if (!events_.empty()) {
    net::received msg = std::move(events_.front());
    events_.pop_front();
    return msg;
  }
  const auto deadline = net::steady::now() + timeout;
  while (auto msg = receive(deadline)) {
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

void broker_client::throw_timeout() const {
  const auto ms = timeout_.count();
  const std::string limit =
      ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
  throw std::runtime_error("no reply from the broker at " + endpoint_ + " within " + limit +
                           " (is hearth-broker running? set --broker or HEARTH_BROKER)");
}

}  // namespace hearth::cli
