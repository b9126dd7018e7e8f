// broker_bench: the broker end to end on loopback with persistence on (a real SQLite file in a
// temporary directory, the broker's default settings: durability full, each reply after an
// fsync'd commit; --durability normal for the weaker mode), our figures beside the targets:
//
//   1. jobs per second: one hearth-node (null engine, as fast as possible, 64 slots) and a client
//      that pipelines 1-token jobs with watch = true; acknowledged (accepted), dispatched
//      (job_running, sent when the broker assigns a job) and completed (job_done) per second;
//   2. tokens per second relayed to a watching client: a few long jobs on the same node;
//   3. the latency the broker adds between a node sending a token chunk and the watching client
//      receiving it: the bench plays the node itself (bench_node: the tests' fake node, on its own
//      thread) and stamps each 1-token chunk with the steady_clock time of its send.
//
// Beside them: the size of the WAL at the end of the run (its checkpoints keep it bounded) and how
// much the database grew per 10,000 jobs of the first run.
//
// At the end the broker is stopped and its database read: every submitted job must be recorded.
// Nothing is asserted on timing. The exit status is 1 only when the system failed (a job lost or
// failed, a stream with a gap, a timeout, a child process that died, jobs missing from the
// database), with the reason on stderr and the temporary directory (logs, database) kept.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/connection.h"
#include "client/protocol.h"
#include "schema/curve-cert.h"
#include "schema/zmq-io.h"
#include "tests/child-process.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/testdata.h"

namespace {

using namespace hearth;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The system under test failed (not merely slow): exit 1 with this message.
struct bench_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& why) {
  throw bench_failure(why);
}

double secs(clock_type::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

double self_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// --- the client ------------------------------------------------------------------------------

struct event {
  wire::command cmd = wire::command::error;
  std::string body;
  int64_t recv_ns = 0;  // steady_clock, taken as the message left the socket
};

// One DEALER socket speaking the client side of the protocol through the client library
// (client/connection.h opens it and sends every request; client/protocol.h says which reply answers
// which request). The bench keeps up to --window requests in flight on it, reading replies and
// events as they come with their arrival times, which the library's blocking face (one request at
// a time) does not do.
class bench_client {
 public:
  bench_client(const std::string& endpoint, const net::curve_client_keys& keys)
      : sock_(client::dealer_open(ctx_, keys)) {
    client::dealer_connect(sock_, endpoint);
  }

  template <class M>
  void send(const M& m) {
    if (!client::request_send(sock_, M::cmd, wire::encode(m)))
      fail("the client could not send a " + std::string(wire::command_name(M::cmd)));
  }

  // Waits until a message is readable or the timeout passes.
  void wait(milliseconds timeout) {
    zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
    net::poll(items, 1, timeout);
  }

  // The next message, without blocking.
  std::optional<event> next() {
    auto msg = net::try_recv(sock_, false);
    if (!msg) return std::nullopt;
    const int64_t t = now_ns();
    const auto frames = msg->views();
    const auto env = wire::open_envelope(frames);
    if (!env.ok) fail("the broker sent a malformed message: " + env.err.message);
    return event{env.env.cmd, std::string(env.env.body), t};
  }

  // A request and its reply; events arriving meanwhile are dropped (used only while idle).
  template <class Reply, class Request>
  Reply request(Request r, milliseconds timeout = milliseconds(10000)) {
    r.request_id = ++next_id_;
    send(r);
    const auto until = clock_type::now() + timeout;
    while (clock_type::now() < until) {
      wait(milliseconds(50));
      while (auto ev = next()) {
        if (client::is_job_event(ev->cmd)) continue;
        const auto answers = client::reply_request_id(ev->body);
        if (!answers || answers.value() != r.request_id) continue;
        if (ev->cmd == wire::command::error) {
          auto e = wire::decode<wire::error_reply>(ev->body);
          fail(std::string(wire::command_name(Request::cmd)) + " refused: " +
               (e ? std::string(wire::error_code_name(e->code)) + ": " + e->message
                  : std::string("(undecodable)")));
        }
        if (ev->cmd != Reply::cmd) continue;
        auto d = wire::decode<Reply>(ev->body);
        if (d) return std::move(d.value());
      }
    }
    fail("no reply to " + std::string(wire::command_name(Request::cmd)) + " within " +
         std::to_string(timeout.count()) + " ms");
  }

  uint64_t next_request_id() { return ++next_id_; }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  uint64_t next_id_ = 0;
};

[[noreturn]] void fail_on_error(const event& ev, const std::string& during) {
  auto e = wire::decode<wire::error_reply>(ev.body);
  fail("the broker answered with an error during " + during + ": " +
       (e ? std::string(wire::error_code_name(e->code)) + ": " + e->message
          : std::string("(undecodable)")));
}

wire::submit make_submit(const std::string& model, int32_t max_tokens) {
  wire::submit s;
  s.model = model;
  s.prompt = "once upon a time";
  s.params.max_tokens = max_tokens;
  s.watch = true;
  return s;
}

// --- the node of the latency measurement ------------------------------------------------------

// The tests' fake node (tests/fake-node.h) on a thread of its own, model "latency", one slot: it
// pulls one job and streams it as `count` 1-token chunks at `rate` chunks/s, each chunk's text the
// steady_clock nanoseconds of its send, then job_final; it heartbeats until finish().
class bench_node {
 public:
  static constexpr const char* name = "bench_node";
  static constexpr const char* model = "latency";

  // Returns once the broker has welcomed the node.
  bench_node(const std::string& endpoint, const net::curve_client_keys& keys, uint32_t rate,
             uint32_t count)
      : node_(endpoint, keys, name), rate_(rate), count_(count) {
    node_.hello(1, {model});
    if (!node_.welcomed()) fail("bench_node did not register with the broker");
    thread_ = std::jthread([this](std::stop_token stop) {
      try {
        node_.pull_and_run(1, stop, [&](const wire::job_assign& a) { stream(a, stop); });
      } catch (const std::exception& e) {
        set_error(std::string("bench_node: ") + e.what());
      }
      done_ = true;
    });
  }
  ~bench_node() { finish(); }

  bool done() const { return done_.load(); }
  uint64_t sent() const { return sent_.load(); }
  std::string error() {
    std::lock_guard lk(mu_);
    return error_;
  }
  // Ends the thread and says goodbye.
  void finish() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    thread_.join();
    node_.bye();
  }

 private:
  void set_error(std::string e) {
    std::lock_guard lk(mu_);
    if (error_.empty()) error_ = std::move(e);
  }

  void stream(const wire::job_assign& a, const std::stop_token& stop) {
    if (streamed_) return set_error("bench_node: a second job_assign; pulled only one");
    streamed_ = true;
    node_.send(wire::job_started{a.job_id, a.attempt, 1});
    const auto start = clock_type::now();
    const auto period = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(1.0 / rate_));
    for (uint32_t i = 0; i < count_ && !stop.stop_requested(); ++i) {
      std::this_thread::sleep_until(start + period * i);
      node_.send(wire::job_tokens{a.job_id, a.attempt, i, 1, std::to_string(now_ns())});
      sent_ = i + 1;
    }
    wire::job_final f;
    f.job_id = a.job_id;
    f.attempt = a.attempt;
    f.state = wire::job_state::completed;
    f.stop_reason = "max_tokens";
    f.n_prompt = 1;
    f.n_gen = uint32_t(sent_.load());
    f.gen_ms = secs(clock_type::now() - start) * 1e3;
    node_.send(f);
  }

  testing::fake_node node_;
  const uint32_t rate_;
  const uint32_t count_;
  bool streamed_ = false;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> sent_{0};
  std::mutex mu_;
  std::string error_;
  std::jthread thread_;
};

// --- the measurements ------------------------------------------------------------------------

struct options {
  uint32_t jobs = 20000;
  uint32_t window = 2000;
  double seconds = 3;
  uint32_t long_jobs = 4;
  uint32_t latency_rate = 2000;  // chunks per second from bench_node
  bool json = false;
  std::string dump_latency;  // file for every latency sample: seq, send times, latency (us)
  bool auth = false;         // the broker with --auth: CURVE on every connection
  std::string durability;    // the broker's `durability:` setting; "" = its default (full)
};

// With --auth: the broker's folder of keys and a key for each peer of the bench.
struct bench_keys {
  std::string dir;
  net::curve_client_keys client, bench_node;
  std::vector<std::string> broker_args, node_args;
};

bench_keys make_keys(const std::string& dir, bool auth) {
  bench_keys k;
  if (!auth) return k;
  k.dir = dir;
  auto must = [](auto r) {
    if (!r) fail(r.message());
    return std::move(r.value());
  };
  for (const char* sub : {"nodes", "clients"}) std::filesystem::create_directories(dir + "/" + sub);
  auto save = [&](const std::string& name, const std::string& role_dir) {
    auto c = must(net::curve_cert_generate(name));
    if (auto r = net::curve_cert_save(c, dir + "/secret", name); !r) fail(r.message());
    if (!role_dir.empty()) {
      std::filesystem::copy_file(dir + "/secret/" + name + ".pub",
                                 dir + "/" + role_dir + "/" + name + ".pub");
    }
    return dir + "/secret/" + name + ".key";
  };
  auto broker = must(net::curve_cert_generate("broker"));
  if (auto r = net::curve_cert_save(broker, dir, "broker"); !r) fail(r.message());
  const std::string broker_pub = dir + "/broker.pub";
  const std::string node_key = save("bench-node-1", "nodes");
  k.client = must(net::curve_client_keys_load(broker_pub, save("bench-client", "clients")));
  k.bench_node = must(net::curve_client_keys_load(broker_pub, save("bench_node", "nodes")));
  k.broker_args = {"--auth", dir};
  k.node_args = {"--broker-key", broker_pub, "--key", node_key};
  return k;
}

struct cpu_meter {
  testing::child_process* broker = nullptr;
  testing::child_process* node = nullptr;
  double b0 = 0, n0 = 0, s0 = 0;
  clock_type::time_point t0;
  void start() {
    b0 = broker->cpu_seconds();
    n0 = node->cpu_seconds();
    s0 = self_cpu_seconds();
    t0 = clock_type::now();
  }
  // Shares of one core over the stage: broker, node, this process (client and fake node).
  nlohmann::json stop() const {
    const double wall = std::max(1e-9, secs(clock_type::now() - t0));
    return {{"wall_s", wall},
            {"broker_cpu", (broker->cpu_seconds() - b0) / wall},
            {"node_cpu", (node->cpu_seconds() - n0) / wall},
            {"bench_cpu", (self_cpu_seconds() - s0) / wall}};
  }
};

struct jobs_result {
  uint64_t accepted = 0, running = 0, done = 0;
  double ack_s = 0, dispatch_s = 0, done_s = 0;
  std::vector<double> ack_latency_ms;  // submit -> accepted, per job
  std::vector<double> e2e_latency_ms;  // submit -> job_done, per job
  nlohmann::json cpu;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

jobs_result measure_jobs(bench_client& c, const options& o, cpu_meter& cpu,
                         testing::child_process& broker, testing::child_process& node) {
  jobs_result r;
  r.ack_latency_ms.reserve(o.jobs);
  r.e2e_latency_ms.reserve(o.jobs);
  std::map<uint64_t, int64_t> submitted_at;      // request_id -> ns
  std::map<uint64_t, int64_t> job_submitted_at;  // job_id -> ns
  uint64_t n_submitted = 0;
  cpu.start();
  const auto t0 = clock_type::now();
  clock_type::time_point t_ack = t0, t_run = t0, t_done = t0, last_progress = t0;
  while (r.done < o.jobs) {
    while (n_submitted < o.jobs && n_submitted - r.done < o.window) {
      auto s = make_submit("bench", 1);
      s.request_id = c.next_request_id();
      submitted_at[s.request_id] = now_ns();
      c.send(s);
      ++n_submitted;
    }
    c.wait(milliseconds(100));
    while (auto ev = c.next()) {
      const auto now = clock_type::now();
      switch (ev->cmd) {
        case wire::command::accepted: {
          auto a = wire::decode<wire::accepted>(ev->body);
          if (!a) fail("undecodable accepted");
          auto it = submitted_at.find(a->request_id);
          if (it == submitted_at.end()) fail("accepted for an unknown request");
          r.ack_latency_ms.push_back(double(ev->recv_ns - it->second) / 1e6);
          job_submitted_at[a->job_id] = it->second;
          submitted_at.erase(it);
          ++r.accepted;
          t_ack = now;
          break;
        }
        case wire::command::job_running:
          ++r.running;
          t_run = now;
          break;
        case wire::command::job_done: {
          auto d = wire::decode<wire::job_done>(ev->body);
          if (!d) fail("undecodable job_done");
          if (d->state != wire::job_state::completed) {
            fail("job " + std::to_string(d->job_id) + " ended " +
                 std::string(wire::job_state_name(d->state)) + ": " + d->error);
          }
          if (d->n_gen != 1) {
            fail("job " + std::to_string(d->job_id) + " generated " + std::to_string(d->n_gen) +
                 " tokens, asked for 1");
          }
          auto it = job_submitted_at.find(d->job_id);
          if (it != job_submitted_at.end()) {
            r.e2e_latency_ms.push_back(double(ev->recv_ns - it->second) / 1e6);
            job_submitted_at.erase(it);
          }
          ++r.done;
          t_done = now;
          last_progress = now;
          break;
        }
        case wire::command::error:
          fail_on_error(*ev, "the jobs/s run");
        default:
          break;  // job_queued, job_tokens
      }
    }
    if (clock_type::now() - last_progress > seconds(30)) {
      fail("no job finished for 30 s: " + std::to_string(r.done) + " of " + std::to_string(o.jobs) +
           " done, " + std::to_string(r.accepted) + " accepted, " + std::to_string(r.running) +
           " dispatched");
    }
    if (!broker.running()) fail("hearth-broker died during the jobs/s run");
    if (!node.running()) fail("hearth-node died during the jobs/s run");
  }
  r.cpu = cpu.stop();
  if (r.accepted != o.jobs || r.running != o.jobs) {
    fail(std::to_string(o.jobs) + " jobs finished but " + std::to_string(r.accepted) +
         " accepted and " + std::to_string(r.running) + " job_running events arrived");
  }
  r.ack_s = secs(t_ack - t0);
  r.dispatch_s = secs(t_run - t0);
  r.done_s = secs(t_done - t0);
  return r;
}

struct tokens_result {
  uint64_t tokens = 0;  // received in the window
  uint64_t chunks = 0;
  uint64_t jobs = 0;  // long jobs submitted in all
  double window_s = 0;
  nlohmann::json cpu;
};

// Keeps o.long_jobs jobs of 500,000 tokens streaming (a finished one is replaced) and counts the
// tokens relayed in the o.seconds after the first one arrives; then cancels what still runs.
tokens_result measure_tokens(bench_client& c, const options& o, cpu_meter& cpu,
                             testing::child_process& broker, testing::child_process& node) {
  constexpr int32_t k_tokens_per_job = 500000;
  tokens_result r;
  struct stream {
    uint64_t next_seq = 0;
    bool done = false;
  };
  std::map<uint64_t, stream> streams;
  std::set<uint64_t> pending_requests;
  size_t n_live = 0;  // submitted and not yet done
  auto submit_one = [&] {
    auto s = make_submit("bench", k_tokens_per_job);
    s.request_id = c.next_request_id();
    pending_requests.insert(s.request_id);
    c.send(s);
    ++r.jobs;
    ++n_live;
  };
  for (uint32_t i = 0; i < o.long_jobs; ++i) submit_one();
  std::optional<clock_type::time_point> t0;
  clock_type::time_point t_end{};
  bool cancelled = false;
  const auto window = std::chrono::duration<double>(o.seconds);
  auto deadline = clock_type::now() + seconds(30) + std::chrono::duration_cast<seconds>(window);
  while (n_live > 0) {
    c.wait(milliseconds(20));
    while (auto ev = c.next()) {
      switch (ev->cmd) {
        case wire::command::accepted: {
          auto a = wire::decode<wire::accepted>(ev->body);
          if (!a || !pending_requests.erase(a->request_id)) fail("unexpected accepted");
          streams[a->job_id];
          if (cancelled) c.send(wire::cancel{c.next_request_id(), a->job_id});
          break;
        }
        case wire::command::job_tokens: {
          auto t = wire::decode<wire::job_tokens>(ev->body);
          if (!t) fail("undecodable job_tokens");
          auto it = streams.find(t->job_id);
          if (it == streams.end()) fail("tokens of an unknown job " + std::to_string(t->job_id));
          if (t->seq != it->second.next_seq) {
            fail("job " + std::to_string(t->job_id) + ": a stream gap, got seq " +
                 std::to_string(t->seq) + ", expected " + std::to_string(it->second.next_seq));
          }
          it->second.next_seq += t->n_tokens;
          if (!t0) {
            t0 = clock_type::now();
            t_end = *t0 + std::chrono::duration_cast<clock_type::duration>(window);
            cpu.start();
          }
          if (!cancelled) {
            r.tokens += t->n_tokens;
            ++r.chunks;
          }
          break;
        }
        case wire::command::job_done: {
          auto d = wire::decode<wire::job_done>(ev->body);
          if (!d) fail("undecodable job_done");
          auto it = streams.find(d->job_id);
          if (it == streams.end() || it->second.done) fail("unexpected job_done");
          const bool ok = d->state == wire::job_state::completed ||
                          (cancelled && d->state == wire::job_state::cancelled);
          if (!ok) {
            fail("long job " + std::to_string(d->job_id) + " ended " +
                 std::string(wire::job_state_name(d->state)) + ": " + d->error);
          }
          if (d->n_gen != it->second.next_seq) {
            fail("job " + std::to_string(d->job_id) + ": done after " + std::to_string(d->n_gen) +
                 " tokens but " + std::to_string(it->second.next_seq) + " were relayed");
          }
          if (d->state == wire::job_state::completed && d->n_gen != uint32_t(k_tokens_per_job)) {
            fail("job " + std::to_string(d->job_id) + " completed after " +
                 std::to_string(d->n_gen) + " tokens, asked for " +
                 std::to_string(k_tokens_per_job));
          }
          it->second.done = true;
          --n_live;
          if (!cancelled) submit_one();
          break;
        }
        case wire::command::error:
          if (!cancelled) fail_on_error(*ev, "the tokens/s run");
          break;  // a cancel that raced the job's end: not_cancellable
        default:
          break;  // job_queued, job_running, ok
      }
    }
    if (t0 && !cancelled && clock_type::now() >= t_end) {
      r.cpu = cpu.stop();
      r.window_s = secs(clock_type::now() - *t0);
      cancelled = true;
      for (const auto& [id, st] : streams) {
        if (!st.done) c.send(wire::cancel{c.next_request_id(), id});
      }
      deadline = clock_type::now() + seconds(30);
    }
    if (clock_type::now() > deadline) {
      fail(std::string(t0 ? "the long jobs did not end" : "no token arrived") + " in time (" +
           std::to_string(n_live) + " of " + std::to_string(r.jobs) + " still live)");
    }
    if (!broker.running()) fail("hearth-broker died during the tokens/s run");
    if (!node.running()) fail("hearth-node died during the tokens/s run");
  }
  return r;
}

struct latency_result {
  std::vector<double> us;
  std::vector<int64_t> sent_ns;
  uint64_t sent = 0;
  nlohmann::json cpu;
};

latency_result measure_latency(bench_client& c, const std::string& endpoint,
                               const net::curve_client_keys& keys, const options& o, cpu_meter& cpu,
                               testing::child_process& broker) {
  latency_result r;
  const uint32_t count = std::max<uint32_t>(1, uint32_t(o.latency_rate * o.seconds));
  bench_node fake(endpoint, keys, o.latency_rate, count);
  auto s = make_submit(bench_node::model, int32_t(count));
  s.wait_model = true;
  s.request_id = c.next_request_id();
  c.send(s);
  r.us.reserve(count);
  std::optional<uint64_t> job_id;
  bool finished = false;
  cpu.start();
  const auto deadline =
      clock_type::now() + seconds(30) +
      std::chrono::duration_cast<seconds>(std::chrono::duration<double>(o.seconds));
  while (!finished) {
    c.wait(milliseconds(20));
    while (auto ev = c.next()) {
      switch (ev->cmd) {
        case wire::command::accepted: {
          auto a = wire::decode<wire::accepted>(ev->body);
          if (!a || a->request_id != s.request_id) fail("unexpected accepted");
          job_id = a->job_id;
          break;
        }
        case wire::command::job_tokens: {
          auto t = wire::decode<wire::job_tokens>(ev->body);
          if (!t || !job_id || t->job_id != *job_id) fail("unexpected job_tokens");
          if (t->seq != r.us.size()) {
            fail("latency job: a stream gap, got seq " + std::to_string(t->seq) + ", expected " +
                 std::to_string(r.us.size()));
          }
          const int64_t sent = std::stoll(t->text);
          r.sent_ns.push_back(sent);
          r.us.push_back(double(ev->recv_ns - sent) / 1e3);
          break;
        }
        case wire::command::job_done: {
          auto d = wire::decode<wire::job_done>(ev->body);
          if (!d || d->state != wire::job_state::completed) {
            fail("the latency job did not complete" +
                 (d ? ": " + std::string(wire::job_state_name(d->state)) + " " + d->error : ""));
          }
          finished = true;
          break;
        }
        case wire::command::error:
          fail_on_error(*ev, "the latency run");
        default:
          break;
      }
    }
    if (fake.done()) fail(fake.error().empty() ? "bench_node stopped early" : fake.error());
    if (clock_type::now() > deadline) {
      fail("the latency job did not finish in time (" + std::to_string(r.us.size()) + " of " +
           std::to_string(count) + " chunks received)");
    }
    if (!broker.running()) fail("hearth-broker died during the latency run");
  }
  r.cpu = cpu.stop();
  r.sent = fake.sent();
  fake.finish();
  if (!fake.error().empty()) fail(fake.error());
  if (r.us.size() != count) {
    fail("latency job: " + std::to_string(r.us.size()) + " of " + std::to_string(count) +
         " chunks arrived");
  }
  return r;
}

// Waits until hearth-node `name` is online at the broker.
void wait_for_node(bench_client& c, const std::string& name, testing::child_process& broker,
                   testing::child_process& node) {
  const auto until = clock_type::now() + seconds(30);
  while (clock_type::now() < until) {
    if (!broker.running()) fail("hearth-broker exited at start (see its log)");
    if (!node.running()) fail("hearth-node exited at start (see its log)");
    auto r = c.request<wire::nodes_reply>(wire::list_nodes{});
    for (const auto& n : r.nodes) {
      if (n.name == name && n.online) return;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  fail("hearth-node did not register with the broker within 30 s");
}

struct db_stats {
  uint64_t bytes = 0;
  uint64_t jobs = 0;
  std::map<std::string, uint64_t> by_state;
};

// The database's size as the broker's last commit left it (page_count x page_size, read through
// a reader's snapshot, so pages still in the WAL count): unlike the file's size it does not wait
// for checkpoints.
uint64_t db_logical_bytes(const std::string& path) {
  sqlite3* db = nullptr;
  uint64_t bytes = 0;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db,
                           "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                           -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      bytes = uint64_t(sqlite3_column_int64(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  if (bytes == 0) fail("cannot read the size of the broker's database " + path);
  return bytes;
}

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

db_stats read_db(const std::string& path) {
  db_stats s;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const auto n = std::filesystem::file_size(path + suffix, ec);
    if (!ec) s.bytes += n;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string e = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    fail("cannot open the broker's database " + path + ": " + e);
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT state, count(*) FROM jobs GROUP BY state", -1, &st, nullptr) !=
      SQLITE_OK) {
    const std::string e = sqlite3_errmsg(db);
    sqlite3_close(db);
    fail("cannot read the jobs of " + path + ": " + e);
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    const auto* state = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const auto n = uint64_t(sqlite3_column_int64(st, 1));
    s.by_state[state ? state : "?"] = n;
    s.jobs += n;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return s;
}

// The last non-empty line of a file ("" when there is none).
std::string last_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

std::string fmt(double v, int decimals = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Broker CPU microseconds per item of a stage.
double per_item_us(const nlohmann::json& c, uint64_t items) {
  return items ? 1e6 * c.value("broker_cpu", 0.0) * c.value("wall_s", 0.0) / double(items) : 0;
}

std::string cpu_line(const nlohmann::json& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%.2f s wall; cpu of one core: broker %.0f%%, node %.0f%%, "
                "bench %.0f%%",
                c.value("wall_s", 0.0), 100 * c.value("broker_cpu", 0.0),
                100 * c.value("node_cpu", 0.0), 100 * c.value("bench_cpu", 0.0));
  return buf;
}

int run(const options& o) {
  testing::scratch_dir dir("hearth-bench", "HEARTH_KEEP_BENCH_DIRS");
  auto failed = [&](const char* why) {
    dir.keep();
    std::fflush(stdout);
    std::fprintf(stderr, "broker_bench: error: %s\n(logs and database kept in %s)\n", why,
                 dir.path().c_str());
    return 1;
  };
  try {
    const std::string testdata = testing::testdata_root();
    const std::string model_file = testdata + "/models/stories260K.gguf";
    if (!std::filesystem::exists(model_file)) {
      fail("test model missing: " + model_file +
           " (set HEARTH_TESTDATA to the shared testdata folder)");
    }
    const std::string models = dir.file("models");
    std::filesystem::create_directories(models);
    std::filesystem::create_symlink(std::filesystem::absolute(model_file), models + "/bench.gguf");
    const std::string db = dir.file("hearth.db");
    const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(testing::free_port());

    const std::string durability = o.durability.empty() ? "full (default)" : o.durability;
    if (!o.json) {
      std::printf("hearth broker bench (persistence on: %s; durability %s; authentication %s)\n",
                  db.c_str(), durability.c_str(), o.auth ? "on: CURVE" : "off");
    }
    std::fflush(stdout);
    const bench_keys keys = make_keys(dir.file("auth"), o.auth);
    std::vector<std::string> broker_argv = {HEARTH_BROKER_BIN, "--bind", endpoint, "--db", db};
    broker_argv.insert(broker_argv.end(), keys.broker_args.begin(), keys.broker_args.end());
    if (!o.durability.empty()) {
      std::ofstream(dir.file("broker.yaml")) << "durability: " << o.durability << "\n";
      broker_argv.insert(broker_argv.end(), {"--config", dir.file("broker.yaml")});
    }
    testing::child_process broker(broker_argv, dir.file("broker.log"));
    std::vector<std::string> node_argv = {HEARTH_NODE_BIN,
                                          "--broker",
                                          endpoint,
                                          "--name",
                                          "bench-node-1",
                                          "--models",
                                          models,
                                          "--engine",
                                          "null",
                                          "--null-tokens-per-s",
                                          "0",
                                          "--slots",
                                          "64",
                                          "--log-level",
                                          "warn"};
    node_argv.insert(node_argv.end(), keys.node_args.begin(), keys.node_args.end());
    testing::child_process node(node_argv, dir.file("node.log"));
    bench_client c(endpoint, keys.client);
    wait_for_node(c, "bench-node-1", broker, node);
    cpu_meter cpu{&broker, &node};

    const uint64_t db_before_jobs = db_logical_bytes(db);
    const auto jobs = measure_jobs(c, o, cpu, broker, node);
    // Every job of the run is completed, so its rows are whole: queued, assigned, started,
    // completed, with their events and its one token of output.
    const double growth_per_10k =
        double(db_logical_bytes(db) - db_before_jobs) * 10000.0 / double(std::max(1u, o.jobs));
    const auto tokens = measure_tokens(c, o, cpu, broker, node);
    const auto latency = measure_latency(c, endpoint, keys.bench_node, o, cpu, broker);
    if (!o.dump_latency.empty()) {
      // Wall-clock send times too, to line samples up with a log or an strace of the broker.
      const int64_t wall_minus_steady_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count() -
                                           now_ns();
      std::ofstream f(o.dump_latency);
      f << "seq\tsent_ms\tlatency_us\twall_s\tsteady_ns\n";
      for (size_t i = 0; i < latency.us.size(); ++i) {
        char wall[32];
        std::snprintf(wall, sizeof wall, "%.6f",
                      double(latency.sent_ns[i] + wall_minus_steady_ns) / 1e9);
        f << i << '\t' << double(latency.sent_ns[i] - latency.sent_ns[0]) / 1e6 << '\t'
          << latency.us[i] << '\t' << wall << '\t' << latency.sent_ns[i] << '\n';
      }
    }

    // The WAL as the run left it, the broker still running: bounded by its checkpoints.
    const uint64_t wal_end = file_bytes(db + "-wal");

    // A shutdown that is not clean loses nothing acknowledged (every turn commits before it
    // replies), so it is reported after the figures, not failed.
    std::vector<std::string> warnings;
    auto stop_child = [&](testing::child_process& p, const char* name, const std::string& log) {
      const int status = p.stop(seconds(15));
      if (status == 0) return true;
      warnings.push_back(std::string(name) +
                         (status < 0
                              ? " had to be killed after SIGTERM"
                              : " exited with status " + std::to_string(status) + " on SIGTERM") +
                         "; the end of its log: " + last_line(log));
      return false;
    };
    const bool node_clean = stop_child(node, "hearth-node", dir.file("node.log"));
    const bool broker_clean = stop_child(broker, "hearth-broker", dir.file("broker.log"));
    auto print_warnings = [&] {
      std::fflush(stdout);
      for (const auto& w : warnings) std::fprintf(stderr, "broker_bench: warning: %s\n", w.c_str());
    };
    const auto st = read_db(db);
    const uint64_t expected = uint64_t(o.jobs) + tokens.jobs + 1;
    if (st.jobs != expected) {
      fail("the database records " + std::to_string(st.jobs) + " jobs, the bench submitted " +
           std::to_string(expected));
    }
    const uint64_t completed = st.by_state.contains("completed") ? st.by_state.at("completed") : 0;
    if (completed < uint64_t(o.jobs) + 1) {
      fail("the database records only " + std::to_string(completed) + " completed jobs");
    }

    const double ack_rate = jobs.ack_s > 0 ? double(jobs.accepted) / jobs.ack_s : 0;
    const double run_rate = jobs.dispatch_s > 0 ? double(jobs.running) / jobs.dispatch_s : 0;
    const double done_rate = jobs.done_s > 0 ? double(jobs.done) / jobs.done_s : 0;
    const double tok_rate = tokens.window_s > 0 ? double(tokens.tokens) / tokens.window_s : 0;
    const double chunk_rate = tokens.window_s > 0 ? double(tokens.chunks) / tokens.window_s : 0;
    const double p50 = percentile(latency.us, 0.50);
    const double p99 = percentile(latency.us, 0.99);
    const double pmax =
        latency.us.empty() ? 0 : *std::max_element(latency.us.begin(), latency.us.end());

    if (o.json) {
      nlohmann::json j;
      j["db"] = db;
      j["auth"] = o.auth;
      j["durability"] = durability;
      j["db_bytes"] = st.bytes;
      j["wal_bytes_end"] = wal_end;
      j["db_growth_bytes_per_10000_jobs"] = growth_per_10k;
      j["jobs_recorded"] = st.jobs;
      j["jobs_by_state"] = st.by_state;
      j["clean_shutdown"] = {{"broker", broker_clean}, {"node", node_clean}};
      j["jobs"] = {{"n", o.jobs},
                   {"window", o.window},
                   {"acknowledged_per_s", ack_rate},
                   {"dispatched_per_s", run_rate},
                   {"completed_per_s", done_rate},
                   {"target_acknowledged_per_s", 20000},
                   {"target_per_s", 2000},
                   {"dispatched", jobs.running},
                   {"ack_latency_ms_p50", percentile(jobs.ack_latency_ms, 0.5)},
                   {"ack_latency_ms_p99", percentile(jobs.ack_latency_ms, 0.99)},
                   {"e2e_latency_ms_p50", percentile(jobs.e2e_latency_ms, 0.5)},
                   {"e2e_latency_ms_p99", percentile(jobs.e2e_latency_ms, 0.99)},
                   {"broker_cpu_us_per_job", per_item_us(jobs.cpu, jobs.done)},
                   {"stage", jobs.cpu}};
      j["tokens"] = {
          {"streams", o.long_jobs},     {"jobs", tokens.jobs},     {"window_s", tokens.window_s},
          {"tokens", tokens.tokens},    {"chunks", tokens.chunks}, {"tokens_per_s", tok_rate},
          {"chunks_per_s", chunk_rate}, {"target_per_s", 1000000}, {"stage", tokens.cpu}};
      j["latency"] = {{"chunks", latency.us.size()},
                      {"rate_per_s", o.latency_rate},
                      {"p50_us", p50},
                      {"p99_us", p99},
                      {"max_us", pmax},
                      {"target_p99_us", 500},
                      {"stage", latency.cpu}};
      j["warnings"] = warnings;
      std::printf("%s\n", j.dump(2).c_str());
      print_warnings();
      return 0;
    }

    auto row = [](const char* metric, const std::string& ours, const char* target) {
      std::printf("%-30s %-11s %s\n", metric, ours.c_str(), target);
    };
    row("metric", "ours", "target");
    row("jobs/s acknowledged", fmt(ack_rate), ">= 20000");
    row("jobs/s dispatched", fmt(run_rate), ">= 2000");
    row("jobs/s completed end to end", fmt(done_rate), ">= 2000");
    row("tokens/s relayed", fmt(tok_rate), ">= 1000000");
    row("token latency p50 (us)", fmt(p50), "");
    row("token latency p99 (us)", fmt(p99), "<= 500");
    row("token latency max (us)", fmt(pmax), "");
    row("WAL at the end (MiB)", fmt(double(wal_end) / (1 << 20), 2), "");
    row("db growth / 10,000 jobs (MiB)", fmt(growth_per_10k / (1 << 20), 2), "");
    // Broker CPU per unit of work beside what the ceilings allow: a 1-token job is 10 messages
    // through the broker (submit, accepted, job_assign, job_running, job_started, job_tokens in
    // and out, job_final, job_done, node_pull) and 8 row writes (4 changes of state, each with
    // its event); a chunk is one message in and one out.
    constexpr double k_msg_us = 1e6 / 3.2e6, k_row_us = 1e6 / 1.29e6;
    std::printf("\nstages (cpu in shares of one core; the machine has %ld)\n",
                sysconf(_SC_NPROCESSORS_ONLN));
    std::printf("  jobs:    %u 1-token jobs, window %u: %s\n", o.jobs, o.window,
                cpu_line(jobs.cpu).c_str());
    std::printf("           broker cpu %.1f us per job (floor from the ceilings: %.1f us)\n",
                per_item_us(jobs.cpu, jobs.done), 10 * k_msg_us + 8 * k_row_us);
    std::printf(
        "           submit->accepted p50 %.1f ms p99 %.1f ms; submit->job_done p50 %.1f ms "
        "p99 %.1f ms\n",
        percentile(jobs.ack_latency_ms, 0.5), percentile(jobs.ack_latency_ms, 0.99),
        percentile(jobs.e2e_latency_ms, 0.5), percentile(jobs.e2e_latency_ms, 0.99));
    std::printf("  tokens:  %u streams (%llu jobs of 500000 tokens): %s\n", o.long_jobs,
                static_cast<unsigned long long>(tokens.jobs), cpu_line(tokens.cpu).c_str());
    std::printf(
        "           %llu tokens in %llu chunks (%.0f chunks/s); broker cpu %.2f us per chunk "
        "(floor: %.2f us)\n",
        static_cast<unsigned long long>(tokens.tokens),
        static_cast<unsigned long long>(tokens.chunks), chunk_rate,
        per_item_us(tokens.cpu, tokens.chunks), 2 * k_msg_us);
    std::printf("  latency: %zu 1-token chunks at %u/s from bench_node: %s\n", latency.us.size(),
                o.latency_rate, cpu_line(latency.cpu).c_str());
    std::printf(
        "\nceilings on this machine kind (../shared/BENCHMARKS.md): ZeroMQ DEALER->ROUTER "
        "3.2 M msg/s,\n  round trip p50 109 us / p99 187 us; SQLite WAL 80,000 tx/s "
        "(1 row each), 1.29 M rows/s batched\n");
    std::printf("\ndatabase: %s, %.1f MiB, %llu jobs recorded", db.c_str(),
                double(st.bytes) / (1 << 20), static_cast<unsigned long long>(st.jobs));
    std::string states;
    for (const auto& [state, n] : st.by_state) {
      states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + state;
    }
    std::printf(" (%s)\n", states.c_str());
    print_warnings();
    return 0;
  } catch (const bench_failure& e) {
    return failed(e.what());
  } catch (const testing::process_error& e) {
    return failed(e.what());
  }
}

void usage() {
  std::fprintf(stderr,
               "usage: broker_bench [--jobs N] [--window W] [--seconds S] [--long-jobs K]\n"
               "                    [--latency-rate R] [--dump-latency FILE] [--json] [--auth]\n"
               "                    [--durability full|normal]\n"
               "  --jobs N          1-token jobs of the jobs/s run (default 20000)\n"
               "  --window W        jobs in flight at most (default 2000)\n"
               "  --seconds S       length of the tokens/s window and the latency run (default 3)\n"
               "  --long-jobs K     jobs streaming at once in the tokens/s run (default 4)\n"
               "  --latency-rate R  1-token chunks per second of the latency run (default 2000)\n"
               "  --dump-latency F  write every latency sample to F (seq, send ms, latency us)\n"
               "  --json            machine-readable output\n"
               "  --auth            the broker with --auth: CURVE keys on every connection\n"
               "  --durability M    the broker's durability setting: full (its default: a reply\n"
               "                    after an fsync'd commit) or normal (synced at checkpoints)\n");
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  auto number = [&](int& i, double lo, double hi) {
    if (i + 1 >= argc) {
      usage();
      std::exit(2);
    }
    char* end = nullptr;
    const double v = std::strtod(argv[++i], &end);
    if (*end != 0 || !(v >= lo && v <= hi)) {
      std::fprintf(stderr, "broker_bench: %s must be a number in [%g, %g]\n", argv[i - 1], lo, hi);
      std::exit(2);
    }
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--auth") {
      o.auth = true;
    } else if (a == "--jobs") {
      o.jobs = uint32_t(number(i, 1, 1e7));
    } else if (a == "--window") {
      o.window = uint32_t(number(i, 1, 90000));
    } else if (a == "--seconds") {
      o.seconds = number(i, 0.1, 3600);
    } else if (a == "--long-jobs") {
      o.long_jobs = uint32_t(number(i, 1, 64));
    } else if (a == "--dump-latency" && i + 1 < argc) {
      o.dump_latency = argv[++i];
    } else if (a == "--durability" && i + 1 < argc) {
      o.durability = argv[++i];
      if (o.durability != "full" && o.durability != "normal") {
        std::fprintf(stderr, "broker_bench: --durability must be full or normal\n");
        return 2;
      }
    } else if (a == "--latency-rate") {
      o.latency_rate = uint32_t(number(i, 1, 100000));
    } else {
      usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  testing::child_processes_die_with_signals();
  ::signal(SIGPIPE, SIG_IGN);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "broker_bench: error: %s\n", e.what());
    return 1;
  }
}
