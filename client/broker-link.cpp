#include "client/broker-link.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "client/connection.h"
#include "client/reconnect-policy.h"
#include "client/stream-order.h"
#include "schema/handshake-monitor.h"
#include "schema/zmq-io.h"

namespace hearth::client {
namespace {

using clock = net::steady;

// Bounds on what HTTP clients can make the link hold: requests waiting for a reply, and
// followers. Past them a request is refused at once (limit_reached).
constexpr size_t max_pending_requests = 100000;
constexpr size_t max_followers = 100000;
link_failure no_reply(std::string why) {
  return link_failure{true, wire::error_code::internal, std::move(why)};
}

link_failure handshake_refused(std::string why) {
  return link_failure{true, wire::error_code::internal, std::move(why), true};
}

}  // namespace

// A follower's callback, shared between the link thread (which posts its events) and the I/O
// thread (which runs them and may unfollow meanwhile).
struct follower_sink {
  job_event_fn fn;
  std::atomic<bool> active{true};
};

struct broker_link::impl {
  impl(link_options o, post_fn p);
  ~impl();

  // --- any thread ---
  // What the I/O thread asks of the link thread.
  struct outgoing {
    enum class kind { request, submit, follow, unfollow } what = kind::request;
    wire::command cmd = wire::command::heartbeat;
    wire::command reply = wire::command::ok;
    std::function<std::string(uint64_t)> encode;
    std::function<void(link_result<std::string>)> done;
    std::function<void(link_result<wire::accepted>)> accepted;
    uint64_t job_id = 0;  // follow
    std::string api_key;  // follow
    uint64_t follower = 0;
    std::shared_ptr<follower_sink> sink;
  };
  void enqueue(outgoing o);
  void deliver(std::function<void()> f);
  void deliver_event(const std::shared_ptr<follower_sink>& s, job_event e);
  uint64_t add_follower(job_event_fn events, std::shared_ptr<follower_sink>& sink);
  // Counts one more request waiting for the broker; false (not counted) past the bound.
  bool admit() {
    if (n_pending.fetch_add(1) < max_pending_requests) return true;
    n_pending.fetch_sub(1);
    return false;
  }
  static link_failure too_many_requests() {
    return {false, wire::error_code::limit_reached,
            "the gateway has " + std::to_string(max_pending_requests) +
                " requests waiting for the broker already; try again later"};
  }

  link_options opt;
  post_fn post;
  // False once the link is gone: callbacks still queued on the I/O thread do nothing.
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);
  std::mutex mu;
  std::deque<outgoing> inbox;                                          // guarded by mu
  std::unordered_map<uint64_t, std::shared_ptr<follower_sink>> sinks;  // guarded by mu
  std::atomic<size_t> n_pending{0};  // requests queued or waiting for their reply
  std::atomic<uint64_t> next_follower{1};
  std::atomic<bool> stopping{false};
  std::atomic<bool> is_connected{false};
  int wake_fd = -1;
  std::thread thread;

  // --- the link thread ---
  void run();
  void connect();
  void open_socket();
  void drain_inbox();
  void send_request(outgoing o);
  void receive();
  void on_message(const net::received& msg);
  void on_reply(wire::command cmd, std::string_view body);
  void check_connection(clock::time_point now);
  void connection_lost(const std::string& why);
  void handshake_failed(clock::time_point now, const net::handshake_failure& f);
  void drop_in_flight(const link_failure& why);
  void set_refusal(std::string why);
  void expire(clock::time_point now);
  void rewatch(clock::time_point now);
  void probe(clock::time_point now);
  clock::time_point next_wakeup(clock::time_point now) const;

  struct follower_state {
    uint64_t id = 0;
    std::shared_ptr<follower_sink> sink;
    stream_order stream;  // this follower's stream (repeats dropped, attempts announced)
    std::string api_key;  // the client it follows as (a re-watch presents one follower's)
  };
  enum class watch_state { active, needed, sent };
  struct followed_job {
    std::vector<follower_state> followers;
    watch_state watch = watch_state::active;
    uint64_t watch_request = 0;
    // Lost when the broker forgot the watch; re-watched as soon as the broker is there (no
    // backoff), for the window of the client library's schedule.
    reconnect_policy rewatch_wait{reconnect_policy::request_steps, reconnect_policy::retry_for};
  };
  enum class pending_kind { request, submit, follow, rewatch };
  struct pending {
    pending_kind kind = pending_kind::request;
    wire::command reply = wire::command::ok;
    clock::time_point deadline;
    outgoing o;  // its callbacks, and the follower to register
  };
  void fail(pending& p, const link_failure& f);
  void register_follower(uint64_t job_id, const std::string& api_key, uint64_t id,
                         std::shared_ptr<follower_sink> sink);
  void dispatch(uint64_t job_id, const job_event& e);
  // Its followers get `f` (none: they had job_done), and the job is followed no more.
  void end_job(uint64_t job_id, std::optional<link_failure> f);
  // The follower got its last event: unfollow() has nothing left to stop.
  void forget_follower(uint64_t id);

  zmq::context_t ctx{1};
  zmq::socket_t socket;
  std::unique_ptr<net::handshake_monitor> monitor;  // destroyed before socket
  uint64_t next_request_id = 1;
  std::unordered_map<uint64_t, pending> pending_requests;
  std::deque<std::pair<clock::time_point, uint64_t>> deadlines;  // in send order = deadline order
  std::unordered_map<uint64_t, followed_job> jobs;
  std::unordered_map<uint64_t, uint64_t> follower_jobs;  // follower -> job
  size_t n_followers = 0;
  clock::time_point last_heard = clock::now();
  std::optional<clock::time_point> probe_sent;
  bool was_up = false;
  std::string last_handshake_failure;
  // A failed handshake: the socket is a fresh one, connected at this time, by the schedule's
  // handshake steps (tried for ever: an admin may allow the key any time).
  std::optional<clock::time_point> reconnect_at;
  reconnect_policy handshake_wait{reconnect_policy::handshake_steps, clock::duration::max()};
  // Why the broker is unreachable when it refused the handshake ("" otherwise): what requests
  // fail with, and what /health says. The link thread writes it; refusal() reads it.
  std::string refusal;
  mutable std::mutex refusal_mu;
  std::string refusal_shared;  // guarded by refusal_mu
};

broker_link::impl::impl(link_options o, post_fn p) : opt(std::move(o)), post(std::move(p)) {
  connect();  // here, so that an endpoint that does not parse is the constructor's error
  wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) throw std::runtime_error("broker link: eventfd failed");
  // A random start keeps a late reply meant for an earlier gateway from matching one of ours.
  next_request_id = uint64_t(std::random_device{}() & 0x7fffffff) + 1;
  thread = std::thread([this] { run(); });
}

broker_link::impl::~impl() {
  alive->store(false);
  stopping = true;
  const uint64_t one = 1;
  (void)!write(wake_fd, &one, sizeof one);
  if (thread.joinable()) thread.join();
  monitor.reset();
  socket.close();
  close(wake_fd);
}

// A fresh socket, not connected yet: sends to it fail at once (a DEALER without a peer).
void broker_link::impl::open_socket() {
  monitor.reset();
  if (socket) socket.close();  // linger 0: what the old one still queued goes with it
  socket = dealer_open(ctx, opt.keys);
  monitor = std::make_unique<net::handshake_monitor>(ctx, socket);
  was_up = false;
  is_connected = false;
}

void broker_link::impl::connect() {
  open_socket();
  reconnect_at.reset();
  dealer_connect(socket, opt.endpoint);
}

// --- the I/O thread's side ---

void broker_link::impl::enqueue(outgoing o) {
  {
    std::lock_guard lock(mu);
    inbox.push_back(std::move(o));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd, &one, sizeof one);
}

void broker_link::impl::deliver(std::function<void()> f) {
  post([alive = alive, f = std::move(f)] {
    if (alive->load()) f();
  });
}

void broker_link::impl::deliver_event(const std::shared_ptr<follower_sink>& s, job_event e) {
  post([alive = alive, s, e = std::move(e)] {
    if (alive->load() && s->active.load()) s->fn(e);
  });
}

uint64_t broker_link::impl::add_follower(job_event_fn events,
                                         std::shared_ptr<follower_sink>& sink) {
  sink = std::make_shared<follower_sink>();
  sink->fn = std::move(events);
  const uint64_t id = next_follower++;
  std::lock_guard lock(mu);
  sinks[id] = sink;
  return id;
}

broker_link::broker_link(link_options o, post_fn post)
    : impl_(std::make_unique<impl>(std::move(o), std::move(post))) {}

broker_link::~broker_link() = default;

void broker_link::request_raw(wire::command cmd, wire::command reply,
                              std::function<std::string(uint64_t)> encode,
                              std::function<void(link_result<std::string>)> done) {
  if (!impl_->admit()) {
    impl_->deliver([done = std::move(done)] { done(impl::too_many_requests()); });
    return;
  }
  impl::outgoing o;
  o.cmd = cmd;
  o.reply = reply;
  o.encode = std::move(encode);
  o.done = std::move(done);
  impl_->enqueue(std::move(o));
}

uint64_t broker_link::submit_and_follow(wire::submit s,
                                        std::function<void(link_result<wire::accepted>)> accepted,
                                        job_event_fn events) {
  impl::outgoing o;
  o.what = impl::outgoing::kind::submit;
  o.cmd = wire::command::submit;
  o.reply = wire::command::accepted;
  o.api_key = s.api_key;  // a re-watch after a broker restart presents it again
  o.follower = impl_->add_follower(std::move(events), o.sink);
  const uint64_t id = o.follower;
  if (!impl_->admit()) {
    impl_->deliver([a = std::move(accepted)] { a(impl::too_many_requests()); });
    impl_->forget_follower(id);
    return id;
  }
  s.watch = true;
  o.encode = [s = std::move(s)](uint64_t rid) mutable {
    s.request_id = rid;
    return wire::encode(s);
  };
  o.accepted = std::move(accepted);
  impl_->enqueue(std::move(o));
  return id;
}

uint64_t broker_link::follow(uint64_t job_id, std::string api_key, job_event_fn events) {
  impl::outgoing o;
  o.what = impl::outgoing::kind::follow;
  o.cmd = wire::command::watch;
  o.reply = wire::command::ok;
  o.job_id = job_id;
  o.api_key = std::move(api_key);
  o.follower = impl_->add_follower(std::move(events), o.sink);
  const uint64_t id = o.follower;
  if (!impl_->admit()) {
    impl_->deliver_event(o.sink, impl::too_many_requests());
    impl_->forget_follower(id);
    return id;
  }
  o.encode = [job_id, key = o.api_key](uint64_t rid) {
    wire::watch w;
    w.request_id = rid;
    w.job_id = job_id;
    w.api_key = key;
    return wire::encode(w);
  };
  impl_->enqueue(std::move(o));
  return id;
}

void broker_link::unfollow(uint64_t follower) {
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->sinks.find(follower);
    if (it == impl_->sinks.end()) return;
    it->second->active = false;
    impl_->sinks.erase(it);
  }
  impl::outgoing o;
  o.what = impl::outgoing::kind::unfollow;
  o.follower = follower;
  impl_->enqueue(std::move(o));
}

bool broker_link::connected() const {
  return impl_->is_connected.load();
}

std::string broker_link::refusal() const {
  std::lock_guard lock(impl_->refusal_mu);
  return impl_->refusal_shared;
}

// --- the link thread ---

void broker_link::impl::run() {
  while (!stopping) {
    const auto now = clock::now();
    const auto wake = next_wakeup(now);
    const auto wait = std::max<std::chrono::milliseconds>(
        std::chrono::milliseconds(0), std::chrono::ceil<std::chrono::milliseconds>(wake - now));
    zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0},
                               {monitor->events().handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd, ZMQ_POLLIN, 0}};
    try {
      net::poll(items, 3, wait);
    } catch (const zmq::error_t& e) {
      spdlog::error("broker link: poll failed: {}", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (items[2].revents & ZMQ_POLLIN) {
      uint64_t n = 0;
      (void)!read(wake_fd, &n, sizeof n);
    }
    if (stopping) break;
    drain_inbox();
    receive();
    const auto t = clock::now();
    check_connection(t);
    expire(t);
    rewatch(t);
    probe(t);
  }
}

clock::time_point broker_link::impl::next_wakeup(clock::time_point now) const {
  // The connection's state and the probe are looked at often enough to notice within a tenth
  // of a second; request deadlines exactly.
  auto wake = now + std::chrono::milliseconds(100);
  if (!deadlines.empty()) wake = std::min(wake, deadlines.front().first);
  return wake;
}

void broker_link::impl::drain_inbox() {
  std::deque<outgoing> batch;
  {
    std::lock_guard lock(mu);
    batch.swap(inbox);
  }
  for (auto& o : batch) {
    if (o.what == outgoing::kind::unfollow) {
      auto fj = follower_jobs.find(o.follower);
      if (fj == follower_jobs.end()) continue;  // not registered yet, or already gone
      auto j = jobs.find(fj->second);
      follower_jobs.erase(fj);
      if (j == jobs.end()) continue;
      auto& fs = j->second.followers;
      const auto before = fs.size();
      std::erase_if(fs, [&](const follower_state& f) { return f.id == o.follower; });
      n_followers -= before - fs.size();
      // The broker keeps sending the job's events; with no follower they are dropped here.
      if (fs.empty()) jobs.erase(j);
      continue;
    }
    send_request(std::move(o));
  }
}

void broker_link::impl::send_request(outgoing o) {
  pending p;
  p.kind = o.what == outgoing::kind::submit   ? pending_kind::submit
           : o.what == outgoing::kind::follow ? pending_kind::follow
                                              : pending_kind::request;
  p.reply = o.reply;
  if (p.kind != pending_kind::request && n_followers >= max_followers) {
    p.o = std::move(o);
    return fail(p, link_failure{false, wire::error_code::limit_reached,
                                "the gateway follows " + std::to_string(max_followers) +
                                    " jobs already; try again later"});
  }
  const uint64_t id = next_request_id++;
  const std::string body = o.encode(id);
  p.deadline = clock::now() + opt.request_timeout;
  p.o = std::move(o);
  if (!request_send_now(socket, p.o.cmd, body)) {
    return fail(p, !refusal.empty()
                       ? handshake_refused(refusal)
                       : no_reply("cannot send " + std::string(wire::command_name(p.o.cmd)) +
                                  " to the broker at " + opt.endpoint));
  }
  deadlines.emplace_back(p.deadline, id);
  pending_requests.emplace(id, std::move(p));
}

void broker_link::impl::fail(pending& p, const link_failure& f) {
  switch (p.kind) {
    case pending_kind::request:
      n_pending.fetch_sub(1);
      deliver([done = std::move(p.o.done), f] { done(f); });
      break;
    case pending_kind::submit:
      n_pending.fetch_sub(1);
      deliver([a = std::move(p.o.accepted), f] { a(f); });
      break;
    case pending_kind::follow:
      n_pending.fetch_sub(1);
      deliver_event(p.o.sink, f);
      break;
    case pending_kind::rewatch:
      break;
  }
  if (p.kind == pending_kind::submit || p.kind == pending_kind::follow) {
    forget_follower(p.o.follower);
  }
}

void broker_link::impl::receive() {
  // At most a bounded burst per turn, so that the inbox (new requests) is never starved.
  for (int i = 0; i < 4096; ++i) {
    std::optional<net::received> msg;
    try {
      msg = net::try_recv(socket, false);
    } catch (const zmq::error_t& e) {
      spdlog::warn("broker link: receive failed: {}", e.what());
      return;
    }
    if (!msg) return;
    last_heard = clock::now();
    probe_sent.reset();
    on_message(*msg);
  }
}

void broker_link::impl::on_message(const net::received& msg) {
  const auto views = msg.views();
  auto env = wire::open_envelope(views);
  if (!env.ok) {
    spdlog::warn("broker link: a message from the broker at {} was refused: {}", opt.endpoint,
                 env.err.message);
    return;
  }
  // The broker's heartbeats only make room in its count of what our pipe holds (PROTOCOL.md
  // section 9.4).
  if (env.env.cmd == wire::command::heartbeat) return;
  auto ev = decode_job_event(env.env.cmd, env.env.body);
  if (!ev) return on_reply(env.env.cmd, env.env.body);
  if (!*ev) {
    spdlog::warn("broker link: malformed event from the broker at {}: {}", opt.endpoint,
                 ev->message());
    return;
  }
  dispatch((*ev)->first, (*ev)->second);
}

void broker_link::impl::on_reply(wire::command cmd, std::string_view body) {
  uint64_t request_id = 0;
  std::optional<wire::error_reply> error;
  if (cmd == wire::command::error) {
    auto e = wire::decode<wire::error_reply>(body);
    if (!e) {
      spdlog::warn("broker link: malformed error from the broker: {}", e.message());
      return;
    }
    request_id = e->request_id;
    error = std::move(e).value();
  } else {
    auto r = reply_request_id(body);
    if (!r) {
      spdlog::warn("broker link: {} from the broker without a request_id: {}",
                   wire::command_name(cmd), r.message());
      return;
    }
    request_id = *r;
  }
  auto it = pending_requests.find(request_id);
  if (it == pending_requests.end()) {
    // request_id 0: the broker could not read a request far enough to echo its id (never
    // expected of ours); otherwise the reply to a request that already timed out.
    if (error && request_id == 0) {
      spdlog::warn("broker link: the broker refused a message: {}: {}",
                   wire::error_code_name(error->code), error->message);
    }
    return;
  }
  pending p = std::move(it->second);
  pending_requests.erase(it);
  if (error) {
    const link_failure f{false, error->code, error->message};
    if (p.kind == pending_kind::rewatch) return end_job(p.o.job_id, f);
    return fail(p, f);
  }
  if (cmd != p.reply) {
    const link_failure f{false, wire::error_code::malformed,
                         "expected " + std::string(wire::command_name(p.reply)) +
                             " from the broker, got " + std::string(wire::command_name(cmd))};
    if (p.kind == pending_kind::rewatch) return end_job(p.o.job_id, f);
    return fail(p, f);
  }
  switch (p.kind) {
    case pending_kind::request:
      n_pending.fetch_sub(1);
      deliver([done = std::move(p.o.done), b = std::string(body)]() mutable {
        done(link_result<std::string>(std::move(b)));
      });
      return;
    case pending_kind::submit: {
      n_pending.fetch_sub(1);
      auto a = wire::decode<wire::accepted>(body);
      if (!a) {
        return deliver([cb = std::move(p.o.accepted), why = a.message()] {
          cb(link_failure{false, wire::error_code::malformed, "accepted: " + why});
        });
      }
      // Registered before the next message is read: the job's events follow the reply.
      register_follower(a->job_id, p.o.api_key, p.o.follower, p.o.sink);
      deliver([cb = std::move(p.o.accepted), acc = *a] { cb(acc); });
      return;
    }
    case pending_kind::follow:
      n_pending.fetch_sub(1);
      register_follower(p.o.job_id, p.o.api_key, p.o.follower, p.o.sink);
      return;
    case pending_kind::rewatch:
      if (auto j = jobs.find(p.o.job_id);
          j != jobs.end() && j->second.watch_request == request_id) {
        j->second.watch = watch_state::active;
        j->second.rewatch_wait.recovered();
      }
      return;
  }
}

void broker_link::impl::register_follower(uint64_t job_id, const std::string& api_key, uint64_t id,
                                          std::shared_ptr<follower_sink> sink) {
  if (!sink->active.load()) return forget_follower(id);  // unfollowed before the answer
  jobs[job_id].followers.push_back({id, std::move(sink), stream_order{}, api_key});
  follower_jobs[id] = job_id;
  ++n_followers;
}

void broker_link::impl::dispatch(uint64_t job_id, const job_event& e) {
  auto it = jobs.find(job_id);
  if (it == jobs.end()) return;  // nobody follows it (any more)
  std::vector<job_event> out;
  for (auto& f : it->second.followers) {
    out.clear();
    f.stream.feed(e, out);
    for (auto& o : out) deliver_event(f.sink, std::move(o));
  }
  if (std::holds_alternative<wire::job_done>(e)) end_job(job_id, {});
}

void broker_link::impl::end_job(uint64_t job_id, std::optional<link_failure> f) {
  auto it = jobs.find(job_id);
  if (it == jobs.end()) return;
  if (f) dispatch(job_id, *f);
  for (auto& fs : it->second.followers) {
    follower_jobs.erase(fs.id);
    forget_follower(fs.id);
  }
  n_followers -= it->second.followers.size();
  jobs.erase(it);
}

void broker_link::impl::forget_follower(uint64_t id) {
  std::lock_guard lock(mu);
  sinks.erase(id);
}

void broker_link::impl::check_connection(clock::time_point now) {
  if (reconnect_at) {
    if (now < *reconnect_at) return;
    connect();
  }
  monitor->update();
  if (const auto f = monitor->failure(); f && !monitor->succeeded()) {
    // libzmq connects again by itself after a failure of the connection (no detail: an errno),
    // not after a refusal or a protocol error.
    if (f->kind != net::handshake_failure_kind::no_detail) return handshake_failed(now, *f);
    if (const std::string text = net::handshake_failure_text(*f); text != last_handshake_failure) {
      spdlog::error("broker link: the handshake with the broker at {} failed: {}", opt.endpoint,
                    text);
      last_handshake_failure = text;
    }
  }
  if (monitor->disconnects() > 0) {
    return connection_lost("the connection to the broker at " + opt.endpoint + " dropped");
  }
  const bool up = monitor->succeeded();
  if (up && !was_up) {
    spdlog::info("broker link: connected to the broker at {}", opt.endpoint);
    last_heard = now;
    last_handshake_failure.clear();
    handshake_wait.recovered();
    set_refusal({});
  }
  was_up = up;
  if (probe_sent && now - *probe_sent > reconnect_policy::link_probe_timeout && up) {
    return connection_lost("the broker at " + opt.endpoint + " has not answered for " +
                           std::to_string(reconnect_policy::link_probe_timeout.count()) + " s");
  }
  is_connected = up && now - last_heard < reconnect_policy::link_probe_after +
                                              reconnect_policy::link_probe_timeout;
}

void broker_link::impl::connection_lost(const std::string& why) {
  spdlog::warn(
      "broker link: {}; requests in flight fail, followed jobs are watched again when it "
      "is back",
      why);
  drop_in_flight(no_reply(why));
  connect();
}

// The handshake failed: the broker's ZAP handler refused our key, or the two sides disagree on
// CURVE. libzmq does not try a refused connection again, so without a new socket the link would
// stay down until the gateway restarts, however soon the key is allowed again. Requests fail at
// once with the reason until a handshake succeeds, and /health says it.
void broker_link::impl::handshake_failed(clock::time_point now, const net::handshake_failure& f) {
  const std::string text = net::handshake_failure_text(f);
  const std::string retry = "; trying again, every " +
                            std::to_string(reconnect_policy::handshake_steps.most.count() / 1000) +
                            " s at most";
  std::string why;
  if (f.kind == net::handshake_failure_kind::auth) {
    why = "the broker at " + opt.endpoint + " refused this gateway's key (" + text + ")";
  } else {
    why = "the handshake with the broker at " + opt.endpoint + " failed: " + text;
    if (f.mechanism_mismatch()) {
      why += " (is --broker-key given and the broker run with --auth, or neither?)";
    }
  }
  if (text != last_handshake_failure) {
    spdlog::error("broker link: {}{}", why, retry);
    last_handshake_failure = text;
  }
  set_refusal(why);
  drop_in_flight(handshake_refused(why));
  open_socket();
  reconnect_at =
      now + handshake_wait.next_wait(now).value_or(reconnect_policy::handshake_steps.most);
}

void broker_link::impl::set_refusal(std::string why) {
  if (why == refusal) return;
  refusal = why;
  std::lock_guard lock(refusal_mu);
  refusal_shared = std::move(why);
}

void broker_link::impl::drop_in_flight(const link_failure& why) {
  // Requests sent may or may not have reached the broker: their callers are told there was no
  // reply (a submit carries its request_key, so the caller may try again safely).
  auto requests = std::move(pending_requests);
  pending_requests.clear();
  deadlines.clear();
  for (auto& [id, p] : requests) fail(p, why);
  const auto now = clock::now();
  for (auto& [id, j] : jobs) {
    j.watch = watch_state::needed;
    j.rewatch_wait.lost(now);
  }
  probe_sent.reset();
}

void broker_link::impl::expire(clock::time_point now) {
  bool expired_while_down = false;
  while (!deadlines.empty() && deadlines.front().first <= now) {
    const uint64_t id = deadlines.front().second;
    deadlines.pop_front();
    auto it = pending_requests.find(id);
    if (it == pending_requests.end()) continue;  // answered
    pending p = std::move(it->second);
    pending_requests.erase(it);
    if (p.kind == pending_kind::rewatch) {
      // Tried again when the broker answers (rewatch), until its window has passed.
      if (auto j = jobs.find(p.o.job_id); j != jobs.end() && j->second.watch_request == id) {
        j->second.watch = watch_state::needed;
        j->second.rewatch_wait.lost(now);
      }
      continue;
    }
    const auto ms = opt.request_timeout.count();
    fail(p, no_reply("no reply from the broker at " + opt.endpoint + " within " +
                     std::to_string(ms) + " ms"));
    expired_while_down = !was_up;
  }
  if (expired_while_down && !reconnect_at) {
    // Its caller was told there was no reply: a broker that comes back must not get it (a submit
    // would make a job nobody follows). A fresh socket drops what the old one still queued; the
    // requests still waiting were queued there too and end at their own deadlines.
    connect();
  }
}

void broker_link::impl::rewatch(clock::time_point now) {
  std::vector<uint64_t> gave_up;
  for (auto& [job_id, j] : jobs) {
    if (j.watch != watch_state::needed) continue;
    if (j.rewatch_wait.window_passed(now)) {
      gave_up.push_back(job_id);
      continue;
    }
    if (!was_up) continue;  // sent once the broker is there again
    // What every follower has: the least advanced one's mark, when all are on one attempt;
    // otherwise the latest attempt from its start (attempt 0). Each follower drops what it had.
    stream_resume mark = j.followers.front().stream.resume_point();
    for (const auto& f : j.followers) {
      const stream_resume m = f.stream.resume_point();
      if (m.attempt != mark.attempt) {
        mark = {};
        break;
      }
      if (m.output_offset < mark.output_offset) mark = m;
    }
    wire::watch w;
    w.request_id = next_request_id++;
    w.job_id = job_id;
    w.attempt = mark.attempt;
    w.seq = mark.seq;
    w.output_offset = mark.output_offset;
    w.api_key = j.followers.front().api_key;
    if (!request_send_now(socket, wire::command::watch, wire::encode(w))) continue;
    for (auto& f : j.followers) f.stream.expect_resume(mark);
    pending p;
    p.kind = pending_kind::rewatch;
    p.reply = wire::command::ok;
    p.deadline = now + opt.request_timeout;
    p.o.job_id = job_id;
    deadlines.emplace_back(p.deadline, w.request_id);
    pending_requests.emplace(w.request_id, std::move(p));
    j.watch = watch_state::sent;
    j.watch_request = w.request_id;
  }
  for (uint64_t id : gave_up) {
    end_job(id, no_reply("the broker at " + opt.endpoint + " did not come back within " +
                         std::to_string(reconnect_policy::retry_for.count()) + " s"));
  }
}

void broker_link::impl::probe(clock::time_point now) {
  if (!was_up || probe_sent || now - last_heard < reconnect_policy::link_probe_after) return;
  wire::whoami w;
  w.request_id = next_request_id++;
  if (!request_send_now(socket, wire::command::whoami, wire::encode(w))) return;
  // Any message from the broker answers it (receive() clears probe_sent), so the probe needs no
  // entry among the pending requests.
  probe_sent = now;
}

}  // namespace hearth::client
