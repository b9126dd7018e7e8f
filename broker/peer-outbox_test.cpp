#include "broker/peer-outbox.h"

#include <gtest/gtest.h>

#include <thread>

#include "schema/zmq-io.h"

namespace hearth::broker {
namespace {

using clock = peer_outboxes::clock;
using namespace std::chrono_literals;

// A ROUTER as the broker configures it and one DEALER peer "d1" over inproc, where a pipe holds
// about sndhwm + rcvhwm messages: with both at 1, a peer that does not read blocks at once.
struct router_and_peer {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
  router_and_peer() {
    router.set(zmq::sockopt::router_mandatory, 1);
    router.set(zmq::sockopt::sndhwm, 1);
    router.set(zmq::sockopt::linger, 0);
    router.bind("inproc://outbox-test");
    dealer.set(zmq::sockopt::routing_id, "d1");
    dealer.set(zmq::sockopt::rcvhwm, 1);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect("inproc://outbox-test");
    // The router knows the peer once it has heard from it.
    dealer.send(zmq::str_buffer("hi"), zmq::send_flags::none);
    zmq::message_t m;
    (void)router.recv(m);
    (void)router.recv(m);
  }
  // Reads every message waiting at the peer; returns how many.
  int drain() {
    int n = 0;
    while (auto r = net::try_recv(dealer, false)) ++n;
    return n;
  }
};

TEST(PeerOutbox, QueuesWhatAPeerDoesNotReadAndSendsItOnceItReads) {
  router_and_peer s;
  peer_outboxes o(outbox_limits{1 << 20, 4 << 20, 10s});
  const auto now = clock::now();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(o.send(s.router, "d1", wire::command::ok, std::string(1000, 'x'), now));
  }
  EXPECT_FALSE(o.empty());
  EXPECT_GT(o.bytes_of("d1"), 5000u);
  EXPECT_EQ(o.total_bytes(), o.bytes_of("d1"));
  EXPECT_TRUE(o.take_overflowing(now).empty());

  int received = 0;
  for (int round = 0; round < 1000 && received < 10; ++round) {
    received += s.drain();
    // ZeroMQ hands the reader's "go on" to the router at most every few milliseconds.
    std::this_thread::sleep_for(1ms);
    o.flush(s.router, clock::now());
  }
  received += s.drain();
  EXPECT_EQ(received, 10);
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(o.total_bytes(), 0u);
}

TEST(PeerOutbox, DropsAPeerOverItsBytesOrStalledAndMessagesToVanishedPeers) {
  router_and_peer s;
  peer_outboxes o(outbox_limits{20000, 1 << 20, 10s});
  const auto now = clock::now();
  EXPECT_FALSE(o.send(s.router, "nobody", wire::command::ok, "x", now));
  EXPECT_TRUE(o.empty());

  for (int i = 0; i < 30; ++i)
    o.send(s.router, "d1", wire::command::ok, std::string(1000, 'x'), now);
  auto over = o.take_overflowing(now);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].routing_id, "d1");
  EXPECT_NE(over[0].why.find("max_peer_outbox_bytes"), std::string::npos) << over[0].why;
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(o.total_bytes(), 0u);

  // Under the byte limit, but blocked past the stall limit.
  o.send(s.router, "d1", wire::command::ok, "y", now);
  EXPECT_FALSE(o.empty());
  EXPECT_TRUE(o.take_overflowing(now + 5s).empty());
  over = o.take_overflowing(now + 11s);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_NE(over[0].why.find("peer_stall_ms"), std::string::npos) << over[0].why;
}

TEST(PeerOutbox, OverTheTotalTheLargestOutboxGoes) {
  router_and_peer s;
  peer_outboxes o(outbox_limits{1 << 20, 5000, 10s});
  const auto now = clock::now();
  for (int i = 0; i < 8; ++i)
    o.send(s.router, "d1", wire::command::ok, std::string(1000, 'x'), now);
  auto over = o.take_overflowing(now);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_NE(over[0].why.find("max_outbox_bytes"), std::string::npos) << over[0].why;
  EXPECT_LE(o.total_bytes(), 5000u);
}

}  // namespace
}  // namespace hearth::broker
