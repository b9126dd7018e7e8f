#include "broker/broker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_set>

namespace hearth::broker {
namespace {

// Messages handled per turn before the turn's transaction commits: bounds the latency a burst
// adds to the replies of its first messages.
constexpr int k_burst = 512;

// ZMQ_SNDHWM of the ROUTER, in messages, per peer: what ZeroMQ itself may hold for one peer that
// stopped reading. Twice a turn's burst, so that a reading peer rarely meets it while the
// messages of one turn stream out (at 256 messages the bench's token relay fell behind at once;
// at 32 the jobs/s acknowledged fell from 22,500 to 7,900); what it holds in bytes the outboxes
// bound (peer-outbox.h).
constexpr int k_peer_sndhwm = 1024;
// How often the outboxes are retried while one is non-empty.
constexpr std::chrono::milliseconds k_outbox_retry{1};

}  // namespace

broker::broker(broker_config cfg, std::unique_ptr<job_store> store)
    : cfg_(std::move(cfg)),
      store_(std::move(store)),
      outboxes_(outbox_limits{cfg_.max_peer_outbox_bytes, cfg_.max_outbox_bytes,
                              std::chrono::milliseconds(cfg_.peer_stall_ms), k_peer_sndhwm}),
      out_(cfg_.max_peer_outbox_bytes, outboxes_),
      nodes_(cfg_, *store_, out_, metrics_),
      relay_(*store_, out_, outboxes_) {}

broker::~broker() {
  // The ZAP handler monitors the ROUTER: it goes first, also when run() ends by an exception.
  zap_.reset();
  router_.reset();
}

std::string broker::endpoint() const {
  return endpoint_;
}

void broker::run(const std::atomic<bool>& stop) {
  if (auto r = broker_config_check_exposure(cfg_); !r) throw std::runtime_error(r.message());
  router_ = std::make_unique<zmq::socket_t>(net::make_socket(ctx_, zmq::socket_type::router));
  router_->set(zmq::sockopt::router_mandatory, 1);
  router_->set(zmq::sockopt::sndhwm, k_peer_sndhwm);
  // A peer gets this long to complete its handshake; a connection that says nothing (or cannot
  // prove a key) is closed, so idle sockets cannot pile up.
  router_->set(zmq::sockopt::handshake_ivl, 5000);
  if (!cfg_.auth.empty()) {
    auto keys = allow_list::open(cfg_.auth);
    if (!keys) throw std::runtime_error(keys.message());
    auth_ = std::move(keys.value());
    // The ZAP handler must be bound before the ROUTER: with CURVE and no handler, libzmq lets
    // every key in.
    zap_ = std::make_unique<zap_handler>(
        ctx_, *auth_, *router_, cfg_.max_connections_per_address,
        [this](const char* reason) { metrics_.add(metric::auth_failures, {reason}); });
    router_->set(zmq::sockopt::zap_domain, "hearth");
    router_->set(zmq::sockopt::curve_server, 1);
    router_->set(zmq::sockopt::curve_secretkey, auth_->broker_cert().secret_key);
  }
  try {
    router_->bind(cfg_.bind);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind " + cfg_.bind + ": " + e.what());
  }
  endpoint_ = router_->get(zmq::sockopt::last_endpoint);
  report_.started(net::wall_ms());
  recovery_.load();
  bound_ = true;
  spdlog::info("broker listening on {} (database {}, {} jobs recorded)", endpoint_, cfg_.db,
               store_->job_count());
  if (auth_) {
    spdlog::info("authentication on: CURVE, {} keys allowed from {}, broker key {}", auth_->size(),
                 cfg_.auth, auth_->broker_cert().public_key);
  } else {
    spdlog::warn("authentication off: anyone who can reach {} may use this broker", endpoint_);
  }

  timers_.start(net::steady::now());
  zmq::pollitem_t items[] = {{router_->handle(), 0, ZMQ_POLLIN, 0},
                             {zap_ ? zap_->socket().handle() : nullptr, 0, ZMQ_POLLIN, 0},
                             {zap_ ? zap_->events().handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  const size_t n_items = zap_ ? 3 : 1;
  while (!stop.load(std::memory_order_relaxed)) {
    auto wait = timers_.next_due() - net::steady::now();
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wait).count();
    const bool waiting = !outboxes_.empty() || !relay_.empty();
    // Pruning goes on turn after turn, a batch each, without waiting for a timer.
    const bool pruning = history_.pruning() && !storage_down(net::steady::now());
    wait_ms = std::clamp<int64_t>(wait_ms, 0, pruning ? 0 : waiting ? k_outbox_retry.count() : 100);
    net::poll(items, n_items, std::chrono::milliseconds(wait_ms));
    if (zap_) {
      zap_->serve();
      // Removed certificates stop working within 100 ms (a folder's time changes; a certificate
      // rewritten in place within a second): messages are checked against the list, not only
      // handshakes, and the connections of a removed key are dropped.
      if (gate_.refresh(net::steady::now())) gate_.drop_removed_keys(nodes_);
    }
    turn();
  }
  zap_.reset();
  // Output streamed since the last flush is written before exiting.
  try {
    store_->begin();
    jobs_.flush_all();
    nodes_.store_seen();
    store_->commit();
  } catch (const std::exception& e) {
    store_->rollback();
    spdlog::error("the output streamed since the last flush was not saved: {}", e.what());
  }
  router_.reset();
}

void broker::turn() {
  const auto turn_start = net::steady::now();
  turn_did_work_ = false;
  out_.new_turn();
  attempts_.relayed_before_turn().clear();
  if (!recovery_.serving(net::steady::now())) return;
  try {
    store_->begin();
    std::set<std::string> dropped;
    for (auto& [rid, why] : out_.to_drop()) {
      if (dropped.insert(rid).second) drop_peer(rid, why);
    }
    out_.to_drop().clear();
    const auto now = net::steady::now();
    for (int i = 0; i < k_burst; ++i) {
      auto msg = net::try_recv(*router_, true);
      if (!msg) break;
      if (gate_.ignored(msg->routing_id, now)) continue;
      handle(*msg);
    }
    timers_.run(net::steady::now());
    if (jobs_.dispatch_needed() && !storage_down(now)) jobs_.dispatch();
    const auto commit_start = net::steady::now();
    store_->commit();
    const auto committed = net::steady::now();
    // Only turns that wrote: an idle turn's empty commit would drown the histogram in zeros.
    if (store_->last_commit_wrote()) {
      metrics_.observe(metric::store_commit, {},
                       std::chrono::duration<double>(committed - commit_start).count());
    }
    turn_metrics_.commit(metrics_);
    if (store_->last_commit_wrote() && storage_.wrote()) {
      spdlog::info("the job database is writable again");
    }
  } catch (const store_error& e) {
    // Nothing of the turn was kept, so nothing of it may be told (storage-recovery.h).
    recovery_.failed(e);
  }
  // Only now: a job finished in a turn whose commit failed is still running, with its watchers,
  // for the reload to carry over.
  jobs_.erase_finished();
  send_turn_output();
  // Only turns that did something (a message or a write), for the same reason.
  if (turn_did_work_) {
    metrics_.observe(metric::turn_duration, {},
                     std::chrono::duration<double>(net::steady::now() - turn_start).count());
  }
}

void broker::send_turn_output() {
  const auto now = net::steady::now();
  // Older messages first, so that each peer receives its messages in order.
  outboxes_.flush(*router_, now);
  relay_.catch_up(*router_, jobs_.jobs());
  turn_did_work_ = turn_did_work_ || !out_.messages().empty();
  for (auto& o : out_.messages()) {
    report_.sent(o.cmd);
    if (!outboxes_.send(*router_, o.routing_id, o.cmd, std::move(o.body), now)) continue;
    nodes_.sent(o.routing_id, now);
  }
  out_.clear();
  // Dropping a node requeues its jobs, which writes to the store: that waits for the next turn's
  // transaction.
  for (auto& o : outboxes_.take_overflowing(now)) out_.to_drop().push_back({o.routing_id, o.why});
}

void broker::drop_peer(const std::string& rid, const std::string& why) {
  const auto now = net::steady::now();
  gate_.close(rid, now);
  for (auto& [id, j] : jobs_.jobs()) j.watchers.erase(rid);
  relay_.forget_peer(rid);
  node_entry* node = nodes_.by_routing_id(rid);
  const std::string who = node ? "node " + node->name : "peer " + peer_name(rid);
  if (auto more = drop_log_.admit(now)) spdlog::warn("dropped {}: {}{}", who, why, *more);
  if (node) attempts_.node_lost(*node, who + " was dropped: " + why);
}

void broker::note_connection(const std::string& rid, const std::string& key, net::received& msg) {
  if (!gate_.note_connection(rid, key, msg)) return;
  // Only connections that may still be sent something matter: watchers, nodes, and peers with
  // something in ZeroMQ's pipe or heard from lately.
  std::unordered_set<std::string> keep;
  for (const auto& [id, j] : jobs_.jobs()) keep.insert(j.watchers.begin(), j.watchers.end());
  for (const auto& [name, n] : nodes_.nodes()) keep.insert(n.routing_id);
  gate_.prune_connections(
      keep, [&](const std::string& peer_rid) { return report_.heard_lately(peer_rid); });
}

void broker::handle(net::received& msg) {
  const std::string& rid = msg.routing_id;
  const auto who = gate_.identify(msg);
  if (!who) return;
  const auto frames = msg.views();
  const auto env = wire::open_envelope(frames);
  turn_did_work_ = true;
  report_.note_peer(rid);
  if (env.ok) {
    report_.received(env.env.cmd);
  } else {
    report_.received_invalid();
  }
  if (!env.ok) {
    spdlog::warn("dropped a message from peer {}: {}", peer_name(rid), env.err.message);
    // A peer speaking another version is told so in the error format that never changes.
    if (env.err.code == wire::error_code::version_mismatch) {
      out_.send_error(rid, 0, env.err.code, env.err.message);
    }
    return;
  }
  const std::string_view body = env.env.body;
  if (gate_.refuses(rid, *who, env.env.cmd, body)) return;
  // A request or a hello, not a node's stream: its connection is noted (once per peer).
  if (!wire::command_from_node(env.env.cmd) || env.env.cmd == wire::command::node_hello) {
    note_connection(rid, who->key, msg);
  }
  // Any message on a node's connection is its heartbeat (node_registry::heard).
  node_entry* node = nodes_.by_routing_id(rid);
  if (node) nodes_.heard(*node);

  commands_.handle(rid, *who, env.env.cmd, body, node);
}

}  // namespace hearth::broker
