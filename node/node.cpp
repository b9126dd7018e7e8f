#include "node/node.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "node/attempt-journal.h"
#include "node/hardware.h"
#include "node/stage-host.h"
#include "node/transfer-runner.h"
#include "node/transfer-server.h"
#include "pull/pull.h"
#include "schema/curve-cert.h"
#include "schema/handshake-monitor.h"
#include "schema/zmq-io.h"
#include "store/model-store.h"

namespace hearth::node {
namespace {

// A chunk is sent when this many tokens are pending or the oldest has waited this long.
constexpr uint32_t k_chunk_tokens = 8;
constexpr auto k_chunk_wait = std::chrono::milliseconds(5);
constexpr auto k_backoff_min = std::chrono::milliseconds(250);
constexpr auto k_backoff_max = std::chrono::milliseconds(8000);
// After a broker restart every message the node sent meanwhile is answered with unknown_node.
// One hello answers them all; another goes only if no welcome came within this time (the hello
// was lost or refused).
constexpr auto k_rehello_wait = std::chrono::milliseconds(1000);
// Text per chunk when a stream is sent again (job_resume): well within max_string_bytes.
constexpr size_t k_resend_chunk_bytes = 1 << 20;

// What the engine reported, queued for the network thread.
struct engine_event {
  enum class kind { started, tokens, finished, models_changed } what;
  wire::job_ref ref;
  uint32_t n = 0;  // n_prompt (started) or n_tokens (tokens)
  uint64_t seq = 0;
  std::string text;
  wire::job_final final;
  double load_ms = 0;  // started: the model's load for it
};

// job_sink for the engine: a mutex-protected queue plus an eventfd that wakes the poll. Bounded:
// an engine faster than the link to the broker (the null engine at full speed) waits in push()
// rather than growing the queue without limit.
class event_queue : public job_sink {
 public:
  event_queue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("eventfd failed");
  }
  ~event_queue() override { close(fd_); }
  int fd() const { return fd_; }

  void started(const wire::job_ref& ref, uint32_t n_prompt, double load_ms) override {
    push({engine_event::kind::started, ref, n_prompt, 0, {}, {}, load_ms});
  }
  void tokens(const wire::job_ref& ref, uint64_t seq, uint32_t n_tokens,
              std::string text) override {
    push({engine_event::kind::tokens, ref, n_tokens, seq, std::move(text), {}});
  }
  void finished(const wire::job_final& f) override {
    push({engine_event::kind::finished, {f.job_id, f.attempt}, 0, 0, {}, f});
  }
  void models_changed() override { push({engine_event::kind::models_changed, {}, 0, 0, {}, {}}); }

  // Up to `max` events, oldest first. The eventfd stays signalled while more are waiting.
  std::deque<engine_event> take(size_t max) {
    std::deque<engine_event> out;
    bool more = false;
    {
      std::lock_guard lock(mu_);
      const size_t n = std::min(max, events_.size());
      out.insert(out.end(), std::make_move_iterator(events_.begin()),
                 std::make_move_iterator(events_.begin() + ptrdiff_t(n)));
      events_.erase(events_.begin(), events_.begin() + ptrdiff_t(n));
      more = !events_.empty();
      if (!more) {
        uint64_t v = 0;
        [[maybe_unused]] auto r = read(fd_, &v, sizeof v);
      }
    }
    room_.notify_all();
    return out;
  }

  // No more waiting in push(): used when the network loop stops taking events.
  void unbound() {
    {
      std::lock_guard lock(mu_);
      bounded_ = false;
    }
    room_.notify_all();
  }

 private:
  static constexpr size_t k_capacity = 65536;

  void push(engine_event e) {
    bool wake = false;
    {
      std::unique_lock lock(mu_);
      room_.wait(lock, [&] { return !bounded_ || events_.size() < k_capacity; });
      wake = events_.empty();
      events_.push_back(std::move(e));
      if (wake) {
        const uint64_t one = 1;
        [[maybe_unused]] auto r = write(fd_, &one, sizeof one);
      }
    }
  }
  int fd_;
  std::mutex mu_;
  std::condition_variable room_;
  bool bounded_ = true;
  std::deque<engine_event> events_;
};

// The node's session with the broker. Every change goes through node_daemon::impl::enter(),
// which does what a state asks on entry (and logs it as the node always has):
//
//   registering --welcome--> serving --unknown_node (a broker restart)--> registering
//   registering|serving --silence past the liveness--> lost --backoff--> registering (fresh socket)
//   registering|serving --CURVE handshake failed--> handshake_failed --backoff--> registering
//   lost --welcome during the backoff (the queued hello answered)--> serving
//   any --name_taken|version_mismatch--> refused (run() returns 1)
//
// Stopping is apart from it: once asked (`draining`), the node pulls no more jobs and waits for
// those running, whatever the state of its link, then hands the rest back and says goodbye.
enum class session_state : uint8_t {
  registering,       // a hello is out on the current socket, no welcome for it yet
  serving,           // welcomed: the broker knows the node, credit and jobs flow
  lost,              // no word from the broker past the liveness: a fresh socket after the backoff
  handshake_failed,  // the broker refused the CURVE handshake: the socket is closed, retried later
  refused,           // the broker refused the node for good: run() ends with exit code 1
};

struct pending_chunk {
  uint64_t seq = 0;
  uint32_t n_tokens = 0;
  std::string text;
  net::steady::time_point since;
};

}  // namespace

struct node_daemon::impl {
  node_config cfg;
  std::string hostname = node_host_name();
  // This process among others of the same name (node_hello.instance): kept across reconnects.
  uint64_t instance = (uint64_t(std::random_device{}()) << 32 | std::random_device{}()) | 1;
  wire::hardware_info hardware = hardware_discover();
  event_queue events;
  std::unique_ptr<job_engine> engine;
  net::curve_client_keys keys;
  zmq::context_t ctx;
  std::unique_ptr<zmq::socket_t> sock;
  std::unique_ptr<net::handshake_monitor> monitor;  // watches sock; reset before it

  // hardware as the broker last heard it, and when it is next read again (hardware_refresh_ms).
  net::steady::time_point next_hardware_read{};
  uint32_t heartbeat_ms = 1000;
  uint32_t liveness = 3;
  net::steady::time_point last_heard, last_sent;
  session_state state = session_state::registering;
  // The last hello while no welcome answered it (registering, or lost after registering).
  std::optional<net::steady::time_point> hello_sent;
  uint64_t welcomes = 0;
  std::chrono::milliseconds backoff = k_backoff_min;
  // The attempts it runs, and finished ones held for job_resume, with what it sent of them.
  attempt_journal journal;
  std::map<std::pair<uint64_t, uint32_t>, pending_chunk> pending;
  bool draining = false;  // stop was asked: no more pulls, running jobs finish by drain_deadline
  net::steady::time_point drain_deadline;
  int exit_code = 0;
  std::string refusal;  // the broker's message when it refused the node for good
  // The transfer socket and the transfer runner, from the config (after the store and the
  // engine). The transfer socket is a CURVE server with the node's own key; it reads store blobs
  // and the models directory's files whose digest the catalog knows. A port already taken (several
  // nodes on one machine, `hearth up` beside a node) is logged and a free port taken instead: the
  // hello advertises the port bound, and the broker builds the endpoint from it. Nothing here
  // stops or blocks the node: at worst it serves no copies.
  void start_transfers() {
    if (cfg.transfer_port > 0) {
      transfer_server_options o;
      o.endpoint = "tcp://" + cfg.transfer_bind + ":" + std::to_string(cfg.transfer_port);
      o.key = keys.own;
      o.max_copies = cfg.transfer_max_copies;
      auto locate = [st = store.get(), en = engine.get()](
                        std::string_view d) -> std::optional<std::filesystem::path> {
        if (st->has_blob(d)) return st->blob_path(d);
        return en->file_by_digest(d);
      };
      for (const std::string& endpoint : {o.endpoint, "tcp://" + cfg.transfer_bind + ":*"}) {
        o.endpoint = endpoint;
        try {
          transfers_out = std::make_unique<transfer_server>(o, locate);
          spdlog::info("serving copies to other nodes on port {}", transfers_out->port());
          break;
        } catch (const std::exception& e) {
          spdlog::warn("{}", e.what());
        }
      }
      if (!transfers_out) spdlog::warn("this node serves no copies to other nodes");
    }
    transfer_runner_config rc;
    rc.fetch.key = keys.own;
    rc.fetch.rate_limit = cfg.transfer_rate_limit;
    rc.pull = [](store::model_store& st, const wire::model_fetch& m,
                 const std::set<std::string>& in_use,
                 const std::function<void(const pull_report&)>& progress,
                 const std::atomic<bool>* cancel) {
      pull::pull_options o = pull::pull_options_from_env();
      o.evict_lru = true;
      o.in_use = in_use;
      return pull::pull_model(
          st, {m.source, m.name, m.sha256}, o,
          [&](const pull::pull_progress& p) {
            progress({p.bytes_done, p.bytes_total});
          },
          cancel);
    };
    transfers_in = std::make_unique<transfer_runner>(*store, std::move(rc));
  }

  // A failed handshake is logged once until the node registers, since the admin may add the key
  // any moment and the retries would otherwise fill the log.
  bool handshake_failure_logged = false;
  // The model store, the transfer socket other nodes copy from (null when off or its port was
  // taken) and the transfers onto this node (PROTOCOL.md 16). The runner goes before the store.
  std::unique_ptr<store::model_store> store;
  std::unique_ptr<transfer_server> transfers_out;
  std::unique_ptr<transfer_runner> transfers_in;
  // The stage socket and this node's pipeline stages (PROTOCOL.md 17; null when stage_port is 0
  // or no port could be bound). Before the engine goes: its loader is the engine's.
  std::unique_ptr<stage_host> stages;

  void start_stages() {
    if (cfg.stage_port == 0) return;
    stage_host_options o;
    o.key = keys.own;
    o.memory_limit = cfg.memory_limit;
    o.on_memory = [en = engine.get()](uint64_t bytes) { en->set_stage_memory(bytes); };
    auto load = [en = engine.get()](const std::string& name, layer_range r) {
      return en->load_stage(name, r);
    };
    const std::string wanted = "tcp://" + cfg.stage_bind + ":" + std::to_string(cfg.stage_port);
    for (const std::string& endpoint : {wanted, "tcp://" + cfg.stage_bind + ":*"}) {
      o.endpoint = endpoint;
      try {
        stages = std::make_unique<stage_host>(o, load);
        spdlog::info("pipeline stages on port {}", stages->port());
        break;
      } catch (const std::exception& e) {
        spdlog::warn("{}", e.what());
      }
    }
    if (!stages) return spdlog::warn("this node holds no pipeline stages");
    engine->set_pipelines([st = stages.get()](uint64_t id) { return st->driver(id); });
  }

  // The one place the session's state changes, with what entering each state does. Refused is
  // final: what the broker sends after it changes nothing.
  void enter(session_state next) {
    if (state == session_state::refused) return;
    switch (next) {
      case session_state::registering:
        hello_sent = net::steady::now();
        break;
      case session_state::serving:
        backoff = k_backoff_min;
        hello_sent.reset();
        ++welcomes;
        handshake_failure_logged = false;
        spdlog::info("registered with the broker at {} as '{}'", cfg.broker, cfg.name);
        break;
      case session_state::lost: {
        const auto hb = std::chrono::milliseconds(heartbeat_ms);
        spdlog::warn("no word from the broker at {} for {} ms; reconnecting in {} ms", cfg.broker,
                     (hb * liveness).count(), backoff.count());
        break;
      }
      case session_state::handshake_failed:
        log_handshake_failure();
        break;
      case session_state::refused:
        exit_code = 1;
        break;
    }
    state = next;
  }

  // Whether the link must be made again (after the backoff) before anything else.
  bool link_down() const {
    return state == session_state::lost || state == session_state::handshake_failed;
  }

  template <class M>
  void send(const M& m) {
    if (net::send(*sock, "", m)) last_sent = net::steady::now();
  }

  void connect() {
    monitor.reset();
    sock = std::make_unique<zmq::socket_t>(net::make_socket(ctx, zmq::socket_type::dealer));
    net::curve_client_apply(*sock, keys);
    monitor = std::make_unique<net::handshake_monitor>(ctx, *sock);
    sock->connect(cfg.broker);
    hello();
  }

  void on_handshake_events() {
    monitor->update();
    if (monitor->failure()) enter(session_state::handshake_failed);
  }

  void log_handshake_failure() {
    const auto& f = monitor->failure();
    if (!f || handshake_failure_logged) return;
    handshake_failure_logged = true;
    const std::string why = net::handshake_failure_text(*f);
    if (!keys.enabled()) {
      spdlog::error(
          "the broker at {} runs CURVE and this node has no keys ({}); give "
          "--broker-key and --key (broker_key:, key: in the config file)",
          cfg.broker, why);
    } else if (f->kind == net::handshake_failure_kind::auth) {
      spdlog::error(
          "the broker at {} refused this node's key {} (handshake failed: {}); "
          "retrying until the broker allows it",
          cfg.broker, cfg.key, why);
    } else {
      spdlog::error(
          "the broker at {} did not complete a CURVE handshake with this node's key {} "
          "(handshake failed: {}; is it running with --auth? is {} its key?); retrying",
          cfg.broker, cfg.key, why, cfg.broker_key);
    }
  }

  void hello() {
    wire::node_hello h;
    h.name = cfg.name;
    h.hostname = hostname;
    h.engine = engine->name();
    h.slots = cfg.slots;
    h.hardware = hardware;
    h.models = engine->models();
    h.running = journal.refs();
    h.skipped = engine->skipped();
    h.instance = instance;
    if (transfers_out) {
      h.transfer_port = transfers_out->port();
      h.transfer_key = transfers_out->public_key();
    }
    h.store_capacity = store_capacity();
    if (stages) h.stage_port = stages->port();
    send(h);
    last_heard = net::steady::now();
    enter(session_state::registering);
  }

  uint64_t store_capacity() const { return store ? store->capacity() : 0; }

  wire::node_status status_now() const {
    return {engine->models(), engine->skipped(), hardware, store_capacity()};
  }

  // The models loaded or running now, and the pinned ones: what the store's size limit never
  // evicts for a transfer.
  std::set<std::string> models_in_use() const {
    std::set<std::string> out(cfg.pinned.begin(), cfg.pinned.end());
    for (const auto& m : engine->models())
      if (m.loaded) out.insert(m.name);
    return out;
  }

  void on_model_fetch(const wire::model_fetch& m) {
    if (!transfers_in) {
      send(wire::transfer_status{m.transfer_id, "failed", 0, 0, 0, "", "",
                                 "this node has no model store"});
      return;
    }
    send(transfers_in->start(m, models_in_use()));
  }

  void on_model_evict(const wire::model_evict& m) {
    if (store && store->remove(m.name)) {
      spdlog::info("model {} evicted from the store", m.name);
      engine->rescan_models();
      return;
    }
    if (engine->hide_model(m.name)) {
      spdlog::info(
          "model {} of the models directory is no longer served (until restart; the "
          "file is not deleted)",
          m.name);
      send(status_now());
      return;
    }
    spdlog::warn("asked to evict model {}, which this node does not have", m.name);
  }

  // The transfers' statuses that are due; a model a transfer added is advertised at once.
  void report_transfers(net::steady::time_point now) {
    if (!transfers_in) return;
    bool added = false;
    for (const auto& st : transfers_in->due(now, added)) send(st);
    if (!added) return;
    engine->rescan_models();
    send(status_now());  // the store's capacity changed, whether or not the catalog did
  }

  void flush_chunk(const std::pair<uint64_t, uint32_t>& key) {
    auto it = pending.find(key);
    if (it == pending.end()) return;
    wire::job_tokens chunk{key.first, key.second, it->second.seq, it->second.n_tokens,
                           std::move(it->second.text)};
    pending.erase(it);
    journal.sent(chunk);
    send(chunk);
  }

  // A bounded share of the engine's reports per pass, so the loop comes back to the socket (and
  // its heartbeats) often however fast the engine runs.
  void on_engine_events(size_t max = 4096) {
    for (auto& e : events.take(max)) {
      const auto key = std::pair(e.ref.job_id, e.ref.attempt);
      switch (e.what) {
        case engine_event::kind::started:
          send(wire::job_started{e.ref.job_id, e.ref.attempt, e.n, e.load_ms});
          break;
        case engine_event::kind::tokens: {
          auto [it, fresh] = pending.try_emplace(key);
          auto& c = it->second;
          if (fresh) {
            c.seq = e.seq;
            c.since = net::steady::now();
          }
          c.n_tokens += e.n;
          c.text += e.text;
          if (c.n_tokens >= k_chunk_tokens) flush_chunk(key);
          break;
        }
        case engine_event::kind::finished:
          flush_chunk(key);
          journal.finished(e.final, net::steady::now());
          // The cluster tests read this line to know that an attempt ended on the node.
          spdlog::info("job {} attempt {}: {} after {} tokens", key.first, key.second,
                       wire::job_state_name(e.final.state), e.final.n_gen);
          send(e.final);
          if (!draining) send(wire::node_pull{1});
          break;
        case engine_event::kind::models_changed:
          send(status_now());
          break;
      }
    }
  }

  void on_broker_message(net::received& msg) {
    const auto frames = msg.views();
    const auto env = wire::open_envelope(frames);
    if (!env.ok) {
      spdlog::warn("dropped a message from the broker: {}", env.err.message);
      return;
    }
    last_heard = net::steady::now();
    switch (env.env.cmd) {
      case wire::command::node_welcome: {
        auto m = wire::decode<wire::node_welcome>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed welcome: {}", m.message());
        heartbeat_ms = std::max<uint32_t>(m->heartbeat_ms, 10);
        liveness = std::max<uint32_t>(m->liveness, 1);
        enter(session_state::serving);
        const size_t running = journal.running_count();
        const uint32_t free = cfg.slots > running ? cfg.slots - uint32_t(running) : 0;
        if (!draining && free > 0) send(wire::node_pull{free});
        return;
      }
      case wire::command::job_assign: {
        auto m = wire::decode<wire::job_assign>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed job: {}", m.message());
        if (!journal.start({m->job_id, m->attempt})) return;
        spdlog::info("job {} attempt {}: model {}", m->job_id, m->attempt, m->model);
        engine->submit(*m);
        return;
      }
      case wire::command::job_cancel: {
        auto m = wire::decode<wire::job_cancel>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed cancel: {}", m.message());
        const wire::job_ref ref{m->job_id, m->attempt};
        if (!journal.knows(ref)) return;
        if (!journal.running(ref)) {
          // A held attempt the broker cancels is not its own any more: nothing to resume.
          journal.drop(ref);
          return;
        }
        spdlog::info("job {} attempt {}: cancel", m->job_id, m->attempt);
        engine->cancel(ref);
        return;
      }
      case wire::command::job_resume: {
        auto m = wire::decode<wire::job_resume>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed resume: {}", m.message());
        return on_resume(*m);
      }
      case wire::command::model_fetch: {
        auto m = wire::decode<wire::model_fetch>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed model_fetch: {}", m.message());
        return on_model_fetch(*m);
      }
      case wire::command::transfer_allow: {
        auto m = wire::decode<wire::transfer_allow>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed transfer_allow: {}", m.message());
        if (!transfers_out) {
          return spdlog::warn("transfer {}: a ticket for {}, but this node serves no copies",
                              m->transfer_id, m->node);
        }
        spdlog::info("transfer {}: node {} may copy {} blobs from here", m->transfer_id, m->node,
                     m->digests.size());
        transfers_out->allow(*m);
        return;
      }
      case wire::command::stage_assign: {
        auto m = wire::decode<wire::stage_assign>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed stage_assign: {}", m.message());
        if (!stages) {
          return spdlog::warn("pipeline {}: a stage assigned, but this node holds no stages",
                              m->pipeline_id);
        }
        stages->assign(*m);
        return;
      }
      case wire::command::stage_release: {
        auto m = wire::decode<wire::stage_release>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed stage_release: {}", m.message());
        if (stages) stages->release(m->pipeline_id);
        return;
      }
      case wire::command::model_evict: {
        auto m = wire::decode<wire::model_evict>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed model_evict: {}", m.message());
        return on_model_evict(*m);
      }
      case wire::command::heartbeat:
        return;
      case wire::command::error: {
        auto m = wire::decode<wire::error_reply>(env.env.body);
        if (!m) return spdlog::warn("dropped a malformed error: {}", m.message());
        if (m->code == wire::error_code::unknown_node) {
          if (hello_sent && net::steady::now() - *hello_sent < k_rehello_wait) return;
          spdlog::info("the broker does not know this node (it restarted?); saying hello again");
          hello();
          return;
        }
        spdlog::error("the broker refused this node: {}", m->message);
        if (m->code == wire::error_code::name_taken ||
            m->code == wire::error_code::version_mismatch) {
          refusal = m->message;
          enter(session_state::refused);
        }
        return;
      }
      default:
        spdlog::warn("dropped a {} from the broker: not a node command",
                     wire::command_name(env.env.cmd));
    }
  }

  // The broker has tokens [0, seq) of the attempt: the rest of what was sent goes again, and a
  // held attempt's final after it. What cannot be resumed is handed back for the broker to run
  // again, and stopped here.
  void on_resume(const wire::job_resume& m) {
    const wire::job_ref ref{m.job_id, m.attempt};
    auto replay = journal.resume(ref, m.seq, k_resend_chunk_bytes);
    if (!replay) {
      spdlog::warn("job {} attempt {}: cannot resume from token {}: {}; handing it back", m.job_id,
                   m.attempt, m.seq, replay.message());
      if (journal.running(ref)) {
        engine->cancel(ref);
      } else {
        journal.drop(ref);
      }
      send(wire::job_handback{m.job_id, m.attempt, "cannot resume: " + replay.message()});
      return;
    }
    if (!replay->chunks.empty()) {
      spdlog::info("job {} attempt {}: resuming from token {} ({} chunks)", m.job_id, m.attempt,
                   m.seq, replay->chunks.size());
    }
    for (const auto& c : replay->chunks) send(c);
    if (!replay->final) return;
    send(*replay->final);
    // The broker counted this finished attempt in the node's slots when it capped the credit of
    // the welcome; now that it is recorded the slot is free again: without this credit, a node
    // that held finished attempts across a broker restart would never be given another job.
    // (The broker caps credit at its free slots, so credit granted twice is harmless.)
    if (!draining) send(wire::node_pull{1});
  }

  // Waits out the backoff. The current socket's hello stays queued in it and goes out when the
  // broker is back: a welcome meanwhile keeps that socket (true). Without this a backoff longer
  // than the broker's liveness would let a broker that came back declare the node dead, and
  // requeue the attempts it had just resumed.
  bool welcomed_during_backoff(const std::atomic<bool>& stop) {
    const auto until = net::steady::now() + backoff;
    const uint64_t welcomes_before = welcomes;
    while (net::steady::now() < until && !stop.load()) {
      if (!sock) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      zmq::pollitem_t item = {sock->handle(), 0, ZMQ_POLLIN, 0};
      net::poll(&item, 1, std::chrono::milliseconds(20));
      while (auto msg = net::try_recv(*sock, false)) on_broker_message(*msg);
      if (state == session_state::refused || welcomes != welcomes_before) return true;
    }
    return false;
  }

  // Reads free memory and utilisation again when due; tells the broker when they moved.
  void refresh_hardware(net::steady::time_point now) {
    // Not between a hello and its welcome: the broker would not know the node yet.
    if (cfg.hardware_refresh_ms == 0 || now < next_hardware_read ||
        state == session_state::registering) {
      return;
    }
    next_hardware_read = now + std::chrono::milliseconds(cfg.hardware_refresh_ms);
    wire::hardware_info h = hardware_read();
    h.memory_limit = cfg.memory_limit;
    if (!hardware_changed(hardware, h)) return;
    hardware = std::move(h);
    send(status_now());
  }

  // Sends due chunks and heartbeats, and notices a silent broker (the state is then lost).
  // Returns the time until the next thing is due.
  std::chrono::milliseconds timers() {
    const auto now = net::steady::now();
    auto next = std::chrono::milliseconds(100);
    for (auto it = pending.begin(); it != pending.end();) {
      const auto due = it->second.since + k_chunk_wait;
      if (due <= now) {
        const auto key = (it++)->first;
        flush_chunk(key);
      } else {
        next = std::min(next, std::chrono::duration_cast<std::chrono::milliseconds>(due - now));
        ++it;
      }
    }
    journal.expire(now);
    refresh_hardware(now);
    // Not between a hello and its welcome: the broker would not know the node yet.
    if (state != session_state::registering) report_transfers(now);
    const auto hb = std::chrono::milliseconds(heartbeat_ms);
    if (now - last_sent >= hb) send(wire::heartbeat{});
    // Before calling the broker dead, read what it may have sent while this loop was busy.
    while (now - last_heard > hb * liveness) {
      auto msg = net::try_recv(*sock, false);
      if (!msg) break;
      on_broker_message(*msg);
    }
    if (now - last_heard > hb * liveness) enter(session_state::lost);
    return next;
  }
};

node_daemon::node_daemon(node_config cfg) : p_(std::make_unique<impl>()) {
  if (auto r = node_config_check(cfg); !r) throw std::runtime_error(r.message());
  if (cfg.name.empty()) cfg.name = p_->hostname;
  auto keys = net::curve_client_keys_load(cfg.broker_key, cfg.key);
  if (!keys) throw std::runtime_error(keys.message());
  p_->keys = std::move(keys).value();
  p_->cfg = std::move(cfg);
  p_->hardware.memory_limit = p_->cfg.memory_limit;
  const auto& c = p_->cfg;
  p_->store = std::make_unique<store::model_store>(
      c.store.empty() ? store::default_store_root() : std::filesystem::path(c.store),
      c.store_limit);
  const std::string store_dir = p_->store->root().string();
  if (c.engine == "null") {
    p_->engine = make_null_engine(
        {c.models_dir, c.null_tokens_per_s, c.models_rescan_ms, store_dir, c.pinned}, p_->events);
  } else {
    p_->engine =
        make_batch_engine({c.models_dir, c.models_rescan_ms, c.slots, c.memory_limit, c.threads,
                           c.ctx_per_slot, c.backend, c.device, store_dir, c.pinned},
                          p_->events);
  }
  p_->start_transfers();
  p_->start_stages();
}

node_daemon::~node_daemon() = default;

const std::string& node_daemon::refusal() const {
  return p_->refusal;
}

int node_daemon::run(const std::atomic<bool>& stop) {
  impl& s = *p_;
  s.connect();
  while (s.state != session_state::refused) {
    if (stop.load() && !s.draining) {
      s.draining = true;
      s.drain_deadline = net::steady::now() + std::chrono::milliseconds(s.cfg.drain_timeout_ms);
      spdlog::info("stopping: {} running jobs get up to {} ms to finish", s.journal.running_count(),
                   s.cfg.drain_timeout_ms);
    }
    if (s.draining && (s.journal.running_count() == 0 || net::steady::now() >= s.drain_deadline))
      break;

    // The timers run while the link is up (and find a silent broker: lost).
    const auto wait = s.link_down() ? std::chrono::milliseconds(0) : s.timers();
    if (s.link_down()) {
      // The broker is gone: a fresh socket after a backoff (Paranoid Pirate), then hello again.
      // The engine's reports wait in the queue meanwhile and go out on the new connection.
      // A socket whose handshake failed is closed at once: libzmq would retry it every 100 ms,
      // each a ZAP request and a log line at the broker, and the backoff is for the broker.
      if (s.state == session_state::handshake_failed) {
        s.monitor.reset();
        s.sock.reset();
      }
      if (s.welcomed_during_backoff(stop)) continue;
      s.backoff = std::min(s.backoff * 2, k_backoff_max);
      s.connect();
      continue;
    }
    zmq::pollitem_t items[] = {{s.sock->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, s.events.fd(), ZMQ_POLLIN, 0},
                               {s.monitor->events().handle(), 0, ZMQ_POLLIN, 0}};
    net::poll(items, 3, wait);
    while (auto msg = net::try_recv(*s.sock, false)) s.on_broker_message(*msg);
    if (items[1].revents & ZMQ_POLLIN) s.on_engine_events();
    if (items[2].revents & ZMQ_POLLIN) s.on_handshake_events();
  }
  // Whatever did not finish goes back to the broker to run elsewhere; what finished meanwhile is
  // reported first.
  s.events.unbound();
  const auto unfinished = s.engine->stop();
  s.on_engine_events(SIZE_MAX);
  for (const auto& ref : unfinished) {
    s.pending.erase({ref.job_id, ref.attempt});
    s.send(wire::job_handback{ref.job_id, ref.attempt, "the node is shutting down"});
  }
  for (auto it = s.pending.begin(); it != s.pending.end();) s.flush_chunk((it++)->first);
  // Copies and pulls still running stop here; their partial blobs stay for the next try.
  s.transfers_in.reset();
  s.transfers_out.reset();
  s.send(wire::node_bye{});
  // Give the socket a moment to deliver the goodbye (linger is 0 on hearth sockets).
  s.sock->set(zmq::sockopt::linger, 1000);
  s.monitor.reset();
  s.sock.reset();
  return s.exit_code;
}

}  // namespace hearth::node
