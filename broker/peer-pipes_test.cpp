#include "broker/peer-pipes.h"

#include <gtest/gtest.h>

#include "schema/codec.h"
#include "schema/zmq-io.h"

namespace hearth::broker {
namespace {

using clock = peer_pipes::clock;
using namespace std::chrono_literals;

const std::string k_large(2000, 'x');  // counted against the pipe (k_small_message_bytes or more)

// A ROUTER and one DEALER "p1" over inproc whose pipe takes ZeroMQ's default 1000 messages
// unread, so that every send here is taken and what is counted depends only on the sends.

struct roomy_pipe {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  zmq::socket_t dealer{ctx, zmq::socket_type::dealer};
  roomy_pipe() {
    router.set(zmq::sockopt::router_mandatory, 1);
    router.set(zmq::sockopt::linger, 0);
    router.bind("inproc://peer-pipes-test");
    dealer.set(zmq::sockopt::routing_id, "p1");
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect("inproc://peer-pipes-test");
    dealer.send(zmq::str_buffer("hi"), zmq::send_flags::none);
    zmq::message_t m;
    (void)router.recv(m);  // the router knows the peer once it has heard from it
    (void)router.recv(m);
  }
  const clock::time_point now = clock::now();
  send_status send(peer_pipes& p, const std::string& body, const std::string& to = "p1") {
    return p.send(router, to, wire::command::ok, body, now);
  }
  // The commands of the messages waiting at the peer, in order.
  std::vector<wire::command> received() {
    std::vector<wire::command> out;
    while (auto r = net::try_recv(dealer, false)) {
      const auto views = r->views();
      const auto env = wire::open_envelope(views);
      EXPECT_TRUE(env.ok);
      out.push_back(env.env.cmd);
    }
    return out;
  }
};

// A pipe holds at most its last pipe_messages sends: a large send is counted until that many
// more were taken; small ones are not counted, and a peer with nothing counted has no record.
TEST(PeerPipes, CountsALargeSendUntilPipeMessagesLaterSendsPushItOut) {
  roomy_pipe s;
  peer_pipes p(1 << 20, 4, 10s);
  ASSERT_EQ(s.send(p, k_large), send_status::sent);
  EXPECT_EQ(p.bytes_of("p1"), message_bytes(k_large));
  EXPECT_EQ(p.total(), p.bytes_of("p1"));
  EXPECT_EQ(p.sends_of("p1"), 1u);
  for (uint64_t i = 2; i <= 4; ++i) {
    ASSERT_EQ(s.send(p, "small"), send_status::sent);
    EXPECT_EQ(p.sends_of("p1"), i);
    EXPECT_EQ(p.total(), message_bytes(k_large));
  }
  ASSERT_EQ(s.send(p, "small"), send_status::sent);
  EXPECT_EQ(p.bytes_of("p1"), 0u);
  EXPECT_EQ(p.sends_of("p1"), 0u);
  EXPECT_EQ(p.total(), 0u);
  EXPECT_EQ(s.received().size(), 5u);
}

// A message that does not fit beside what the pipe may still hold goes once heartbeats, each
// taken, have pushed the older ones out of the count; the peer sees them before it.
TEST(PeerPipes, AMessageThatDoesNotFitGoesAfterHeartbeatsPushOlderOnesOut) {
  roomy_pipe s;
  peer_pipes p(5000, 4, 10s);
  const std::string big(3000, 'x');
  ASSERT_EQ(s.send(p, big), send_status::sent);
  EXPECT_EQ(p.room(s.router, "p1", 1, s.now), 5000u - message_bytes(big));
  ASSERT_EQ(s.send(p, big), send_status::sent);
  EXPECT_EQ(p.bytes_of("p1"), message_bytes(big));
  using wire::command;
  EXPECT_EQ(s.received(),
            (std::vector<command>{command::ok, command::heartbeat, command::heartbeat,
                                  command::heartbeat, command::heartbeat, command::ok}));
}

// A closing peer's count stays until it is found gone; one that cannot be closed is forgotten.
TEST(PeerPipes, AClosingPeersCountStaysAndAForgottenOnesGoes) {
  roomy_pipe s;
  peer_pipes p(1 << 20, 64, 10s);
  ASSERT_EQ(s.send(p, k_large), send_status::sent);
  p.closing("p1");
  EXPECT_TRUE(p.closing_peers().contains("p1"));
  EXPECT_TRUE(p.probe(s.router, s.now, [](const std::string&) { return false; }).empty());
  EXPECT_GT(p.bytes_of("p1"), 0u);
  p.forget("p1");
  EXPECT_EQ(p.total(), 0u);
  EXPECT_TRUE(p.closing_peers().empty());
  EXPECT_EQ(s.send(p, k_large, "nobody"), send_status::unreachable);
  EXPECT_EQ(p.total(), 0u);
}

}  // namespace
}  // namespace hearth::broker
