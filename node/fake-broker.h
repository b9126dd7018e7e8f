// A FAKE broker for the node's tests: a ROUTER socket in the test speaking the wire protocol to a
// real node_daemon, recording the job streams it receives.
#pragma once

#include <gtest/gtest.h>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schema/zmq-io.h"

namespace hearth::node::test_fakes {

using namespace std::chrono_literals;

// One attempt's stream as the fake broker received it live (chunks continuing where the last
// ended), and the chunks that came again (a seq below the live count).
struct stream_record {
  std::string text;
  std::map<uint64_t, size_t> starts;  // seq -> byte offset, where each live chunk began
  uint64_t next = 0;
  std::vector<wire::job_tokens> again;
  std::optional<wire::job_final> final;
  std::string text_from(uint64_t seq) const { return text.substr(starts.at(seq)); }
};

class fake_broker {
 public:
  fake_broker() : sock_(net::make_socket(ctx_, zmq::socket_type::router)) {
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }
  stream_record& stream(uint64_t job_id) { return streams_[job_id]; }

  template <class M>
  void send(const M& m) {
    ASSERT_TRUE(net::send(sock_, node_, m));
  }

  // Reads messages until one of type M for which `pred` holds, recording every job_tokens and
  // job_final on the way; nullopt after the timeout.
  template <class M, class P>
  std::optional<M> wait_for(P pred, std::chrono::milliseconds timeout = 20s) {
    const auto until = net::steady::now() + timeout;
    while (net::steady::now() < until) {
      zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
      net::poll(items, 1, 50ms);
      while (auto msg = net::try_recv(sock_, true)) {
        node_ = msg->routing_id;
        const auto frames = msg->views();
        auto env = wire::open_envelope(frames);
        if (!env.ok) continue;
        record(env.env.cmd, env.env.body);
        if (env.env.cmd != M::cmd) continue;
        auto m = wire::decode<M>(env.env.body);
        if (m && pred(*m)) return std::move(m.value());
      }
    }
    return std::nullopt;
  }
  template <class M>
  std::optional<M> wait_for() {
    return wait_for<M>([](const M&) { return true; });
  }

  // Welcomes a hello with heartbeats so rare that the node never thinks the broker dead.
  void welcome() { send(wire::node_welcome{wire::protocol_version, 60000, 10}); }
  // The broker forgets the node (as after a restart): the node says hello again.
  std::optional<wire::node_hello> forget_node() {
    send(wire::error_reply{0, wire::error_code::unknown_node, "say hello again"});
    auto h = wait_for<wire::node_hello>();
    if (h) welcome();
    return h;
  }

 private:
  void record(wire::command cmd, std::string_view body) {
    if (cmd == wire::command::job_tokens) {
      auto t = wire::decode<wire::job_tokens>(body);
      if (!t) return;
      auto& s = streams_[t->job_id];
      if (t->seq == s.next) {
        s.starts[t->seq] = s.text.size();
        s.text += t->text;
        s.next += t->n_tokens;
      } else {
        s.again.push_back(*t);
      }
    } else if (cmd == wire::command::job_final) {
      auto f = wire::decode<wire::job_final>(body);
      if (f && !streams_[f->job_id].final) streams_[f->job_id].final = *f;
    }
  }

  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  std::string node_;  // the node's routing id
  std::map<uint64_t, stream_record> streams_;
};

}  // namespace hearth::node::test_fakes
