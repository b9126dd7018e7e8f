// The envelope helpers under a storm of signals: libzmq fails calls with EINTR whenever a signal
// is pending while it polls its command mailbox, so a daemon's SIGTERM once surfaced as an
// exception out of a non-blocking receive ("hearth-broker: error: Interrupted system call").
// Another thread signals this one without pause while messages go back and forth through a
// ROUTER and a DEALER and a monitor's events are read: every message must arrive whole and in
// order, and nothing may throw.
#include "schema/zmq-io.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "schema/socket-events.h"

namespace hearth::net {
namespace {

std::atomic<uint64_t> g_signals{0};
void count_signal(int) {
  g_signals.fetch_add(1, std::memory_order_relaxed);
}

// SIGUSR1 counted, without SA_RESTART (as plain poll() ignores it anyway), for the test's life.
struct signal_storm {
  explicit signal_storm(pthread_t target) {
    struct sigaction sa {};
    sa.sa_handler = count_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGUSR1, &sa, &old_);
    thread_ = std::thread([this, target] {
      while (!stop_.load(std::memory_order_relaxed)) pthread_kill(target, SIGUSR1);
    });
  }
  ~signal_storm() {
    stop_ = true;
    thread_.join();
    sigaction(SIGUSR1, &old_, nullptr);
  }
  std::atomic<bool> stop_{false};
  std::thread thread_;
  struct sigaction old_ {};
};

std::string body_of(int i) {
  return "message " + std::to_string(i) + std::string(size_t(i % 97), 'x');
}

TEST(zmq_io, messages_arrive_whole_and_in_order_while_signals_interrupt_every_call) {
  zmq::context_t ctx;
  auto router = make_socket(ctx, zmq::socket_type::router);
  router.bind("inproc://signal-storm");
  socket_events events(ctx, router, ZMQ_EVENT_ALL);
  auto dealer = make_socket(ctx, zmq::socket_type::dealer);
  dealer.connect("inproc://signal-storm");

  // At least this many round trips, and on until this many signals have landed: on a loaded
  // machine the signalling thread gets little time, so the count, not the clock, ends the test
  // (before the fix, send_raw failed within the first 12 ms here).
  constexpr int k_messages = 20000;
  constexpr uint64_t k_signals = 2000;
  constexpr int k_most_messages = 5'000'000;
  int received_by_router = 0, received_by_dealer = 0;
  std::string routing_id;
  {
    signal_storm storm(pthread_self());
    for (int i = 0; i < k_messages || g_signals.load() < k_signals; ++i) {
      ASSERT_LT(i, k_most_messages) << "the signalling thread never got to run";
      const std::string body = body_of(i);
      ASSERT_TRUE(send_raw(dealer, "", wire::command::heartbeat, body)) << "message " << i;
      std::optional<received> at_router;
      while (!(at_router = try_recv(router, true))) {
        zmq::pollitem_t item = {router.handle(), 0, ZMQ_POLLIN, 0};
        poll(&item, 1, std::chrono::milliseconds(10));
        while (events.next()) {
        }
      }
      ASSERT_EQ(at_router->frames.size(), 3u);
      ASSERT_EQ(at_router->views()[2], body) << "message " << i;
      ++received_by_router;
      routing_id = at_router->routing_id;
      ASSERT_TRUE(send_raw(router, routing_id, wire::command::heartbeat, body));
      std::optional<received> at_dealer;
      while (!(at_dealer = try_recv(dealer, false))) {
        zmq::pollitem_t item = {dealer.handle(), 0, ZMQ_POLLIN, 0};
        poll(&item, 1, std::chrono::milliseconds(10));
      }
      ASSERT_EQ(at_dealer->frames.size(), 3u);
      ASSERT_EQ(at_dealer->views()[2], body) << "reply " << i;
      ++received_by_dealer;
    }
  }
  EXPECT_GE(received_by_router, k_messages);
  EXPECT_EQ(received_by_dealer, received_by_router);
  std::printf("%d round trips under %llu signals\n", received_by_router,
              static_cast<unsigned long long>(g_signals.load()));
}

}  // namespace
}  // namespace hearth::net
