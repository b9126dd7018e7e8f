// A hand-written node on a raw socket for cluster tests: it says what it likes and does only what
// the test says, so a test can make a node misbehave (issue 15), leave gaps in a stream (issue
// 16's job_resume) or stream what no engine makes (outputs past the null engine's 1,048,576
// tokens of at most 7 bytes).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "tests/cluster.h"

namespace hearth::testing {

// A hello as a plain node sends it (4 threads, 8 GiB, one slot, `models`), for a test to set
// what it is about (ports, a memory limit, layouts) before a fake_node sends it.
wire::node_hello plain_hello(const std::string& name, std::vector<wire::model_info> models);

class fake_node {
 public:
  // What the broker sent it.
  struct replies {
    int welcomes = 0;
    std::vector<wire::job_assign> assigns;
    std::vector<wire::job_cancel> cancels;
    std::vector<wire::error_reply> errors;
  };

  // Its socket is made here, with the key of a node named `name`; it may move to another thread
  // before its first use (ZeroMQ allows a socket to migrate with a full memory barrier).
  fake_node(cluster& c, const std::string& name)
      : fake_node(c.endpoint(), c.client_keys("node", name), name) {}
  // The same for a broker the caller started (bench/broker_bench: no cluster), with `keys` (none
  // without auth).
  fake_node(const std::string& endpoint, const net::curve_client_keys& keys,
            const std::string& name);

  // A node too good to pass over: every model loaded, a big GPU, many threads and slots.
  void hello(const std::string& name, uint32_t slots, const std::vector<std::string>& models);
  void hello(uint32_t slots, const std::vector<std::string>& models) {
    hello(name_, slots, models);
  }
  template <class M>
  void send(const M& m) {
    net::send(sock_->socket(), "", m);
  }
  // `n` hellos with the names flood-0, flood-1, ... as fast as it can; what came back.
  replies hello_flood(int n, std::chrono::milliseconds wait);
  // Waits for the broker's welcome to its hello.
  bool welcomed();
  // Takes a job and says hello again without it, up to `times` times (the broker requeues it
  // each time: a lost attempt); returns how many jobs it took.
  int bounce(int times, std::chrono::milliseconds wait = std::chrono::seconds(2));

  // Says hello with `slots` slots, grants them all, and answers every job_assign with `run` (which
  // sends what the test wants, then node_pull when it wants more) until `stop` is requested,
  // heartbeating meanwhile. For a std::jthread of its own, while the test submits.
  void serve(uint32_t slots, const std::vector<std::string>& models, std::stop_token stop,
             const std::function<void(const wire::job_assign&)>& run);
  // serve() for a node that has said hello already (and waited to be welcomed).
  void pull_and_run(uint32_t slots, std::stop_token stop,
                    const std::function<void(const wire::job_assign&)>& run);
  // Grants one slot, takes the next job and streams `pieces` (each one chunk of
  // `tokens_per_piece` tokens) as its output, then completes it. Returns the job id, or 0 when no
  // job came.
  uint64_t run_one(const std::vector<std::string>& pieces, uint32_t tokens_per_piece);
  // Completes the job `a` gave it after `n_gen` tokens streamed (job_final, max_tokens).
  void complete(const wire::job_assign& a, uint32_t n_gen);
  // node_bye, given up to 500 ms to leave when the node is destroyed.
  void bye();

  // Reads what the broker sent for `timeout` (or until `until` holds): assignments are kept.
  replies listen(std::chrono::milliseconds timeout,
                 const std::function<bool(const replies&)>& until = nullptr);

  // The next message of type M from the broker, skipping others (and sending heartbeats, so that
  // the broker keeps it alive meanwhile); counts the job_resume messages it skips or returns.
  template <class M>
  std::optional<M> next(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      send(wire::heartbeat{});
      auto ev = sock_->next_event(std::chrono::milliseconds(50));
      if (!ev) continue;
      resumes += ev->cmd == wire::command::job_resume;
      if (ev->cmd != M::cmd) continue;
      if (auto m = wire::decode<M>(ev->body)) return std::move(m.value());
    }
    return std::nullopt;
  }
  uint32_t resumes = 0;  // job_resume messages next() has seen

 private:
  std::string name_;
  std::unique_ptr<test_client> sock_;
};

}  // namespace hearth::testing
