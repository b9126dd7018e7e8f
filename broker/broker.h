// The broker: one ROUTER socket that nodes and clients talk to (schema/PROTOCOL.md), the node
// registry, per-model queues, the live state of running jobs, and the job store.
//
// Single-threaded event loop. Each turn reads a burst of messages, handles them (all database
// writes of the burst in one transaction), runs the timers (heartbeats, dead nodes, output
// flushes, queue positions), dispatches queued jobs to nodes with credit, commits, and only then
// sends what the turn produced — so nothing is acknowledged before it is durable.
//
// Sending: no peer can make the broker buffer without bound. The ROUTER has ZMQ_ROUTER_MANDATORY
// and a modest ZMQ_SNDHWM (k_peer_sndhwm messages; ZeroMQ counts messages, not bytes), and every
// send is non-blocking. The outboxes (peer-outbox.h) count the bytes of each peer's last
// k_peer_sndhwm sends, which bound what its pipe holds, and keep that within
// max_peer_outbox_bytes. A message ZeroMQ refuses (EAGAIN: the peer's pipe is full because the
// peer stopped reading), or that would pass that count, waits in that peer's outbox, behind which
// later messages to the peer queue up in order; outboxes are retried every turn, and the loop
// polls every millisecond while one is non-empty. A peer whose outbox passes
// max_peer_outbox_bytes, or that has not taken a message for peer_stall_ms, is dropped: its
// outbox is freed, it stops watching jobs, a node is treated as lost (its attempts are
// requeued), and its connection is closed (peer-connection.h), which frees what ZeroMQ's pipe
// held for it. All peers together hold at most max_outbox_bytes, outboxes and counted pipe bytes
// both: catch-ups share what is left of it, and the peers holding the most that do not read are
// dropped to make room (peer-outbox.h). A dropped peer's messages are discarded unread for
// peer_stall_ms. A message to a peer
// that is gone (EHOSTUNREACH) is dropped. A peer is also dropped when one turn's messages to it
// pass twice max_peer_outbox_bytes (queue_out). So what one peer holds in ZeroMQ's pipe, its
// outbox and one turn's messages stays within about four times max_peer_outbox_bytes (and
// k_peer_sndhwm small messages), plus what the kernel's socket buffers take; all peers within
// max_outbox_bytes and one turn's messages (and their small messages).
// A watcher of a fast stream whose pipe is full is not sent every token chunk: it lags, and
// catches up from the job's output in pages when it reads again (deliver()).
//
// Clients' unfinished jobs are bounded too: per owner (the client's identity) at most
// max_client_queued_jobs jobs and max_client_queued_bytes of prompts and messages, and
// max_queue_bytes over all owners. A job counts from its submit until it finishes, running
// included, because its row (prompt, messages and the output so far) stays in memory until then.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>

#include "broker/allow-list.h"
#include "broker/api-keys.h"
#include "broker/config.h"
#include "broker/job-store.h"
#include "broker/log-limiter.h"
#include "broker/metrics.h"
#include "broker/peer-connection.h"
#include "broker/peer-outbox.h"
#include "broker/token-bucket.h"
#include "broker/zap-handler.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// How far a watcher has an attempt's output: tokens [0, seq) and bytes [0, byte).
struct output_mark {
  uint64_t seq = 0;
  uint64_t byte = 0;
};

// A job the broker is responsible for now (queued or running). Finished jobs live only in the
// store.
struct live_job {
  job_row row;
  std::string output;     // the current attempt's text so far
  uint64_t next_seq = 0;  // the next token index expected from the current attempt
  // How much of `output` is in the store (append_output): bytes [0, stored_bytes).
  uint64_t stored_bytes = 0;
  // How much of the current attempt its watchers were sent. After a reload the node re-sends
  // what the store lacked; watchers get only the part beyond this.
  output_mark relayed;
  bool output_dirty = false;
  bool cancel_requested = false;
  // Attempts lost on the node side that do not count towards max_attempts (requeue()).
  uint32_t forgiven = 0;
  // After a restart: requeued if its node has not reported it by then.
  std::optional<net::steady::time_point> recovered_deadline;
  // The current attempt began before the broker restarted: a gap in its stream is the restart's
  // doing, not its node's.
  bool recovered_attempt = false;
  // The current attempt's stream lost tokens (or may have: its node said hello again) and the
  // node was asked to send it again from next_seq (job_resume, broker-nodes.cpp).
  struct resume_state {
    bool outstanding = false;  // chunks past next_seq are ignored until one at next_seq comes
    bool gap = false;          // such a chunk came: the node has tokens the broker lacks
    uint32_t unanswered = 0;   // resumes sent since the stream last advanced
    net::steady::time_point sent{};
  } resume;
  std::set<std::string> watchers;  // routing ids of clients following it
  uint32_t last_position_sent = UINT32_MAX;
  std::string last_waiting_sent;  // job_queued.waiting last sent to its watchers
  uint64_t queued_bytes = 0;      // its prompt and messages, as counted against the limits
  // For the metrics: when it was last queued (its wait ends at assignment), and whether its
  // first token came (time to first token is observed once per job).
  net::steady::time_point queued_at{};
  bool first_token_seen = false;
  // The current attempt: when it was assigned (its node's measured rate), whether its node said
  // job_started, and when its node last moved it on (assigned, started, tokens, listed in a
  // hello). An attempt that does not move for attempt_start_timeout_ms (before job_started) or
  // attempt_stall_timeout_ms (after) is taken back (broker-jobs.cpp attempt_timers).
  net::steady::time_point assigned_at{};
  bool attempt_started = false;
  net::steady::time_point attempt_progress{};
};

// The bytes a job's prompt and messages hold, as the per-client and queue limits count them.
uint64_t request_bytes(const std::string& prompt, const std::vector<wire::chat_message>& messages);

// What one owner's unfinished jobs hold (the per-client limits).
struct client_usage {
  uint32_t jobs = 0;
  uint64_t bytes = 0;
};

// Who sent a message: the role and key the ZAP handler vouched for (broker/zap-handler.h). On a
// broker without auth every peer is an admin with an empty key: it trusts whoever can reach it.
// A client request that presents an API key acts as that key instead: role client, key "api:" +
// the key's id (broker-api-keys.cpp).
struct peer {
  peer_role role = peer_role::admin;
  std::string key;   // Z85 public key; "" without auth; "api:" + id for an API key
  std::string name;  // the key's certificate file name, or the API key's name
};

struct node_entry {
  std::string name;
  std::string key;         // its public key: the name belongs to this key ("" without auth)
  std::string routing_id;  // "" while offline
  std::string hostname;
  std::string engine;
  uint32_t slots = 0;           // min(declared slots, max_node_slots)
  uint32_t declared_slots = 0;  // what its last hello said
  uint32_t credit = 0;          // jobs it asked for and has not been sent yet
  wire::hardware_info hardware;
  std::vector<wire::model_info> models;
  std::vector<wire::skipped_model> skipped;  // files of its models directory it does not serve
  std::set<uint64_t> running;                // job ids assigned to it
  bool online = false;
  net::steady::time_point last_heard{};
  net::steady::time_point last_sent{};
  int64_t last_seen_ms = 0;               // wall clock, for the registry's last_seen column
  net::steady::time_point last_stored{};  // when last_seen_ms was last written

  // Attempts it lost (broker-nodes.cpp node_lost_attempt): times of the recent ones, oldest
  // first, and the total since the broker started.
  std::deque<net::steady::time_point> recent_losses;
  uint32_t lost = 0;
  // The last k_losses_kept losses, newest last, for node_summary: which attempt, what happened.
  static constexpr size_t k_losses_kept = 8;
  std::deque<wire::node_loss> last_losses;
  // A random number of the node process (node_hello.instance; 0 from an older node): a hello with
  // another one for a live node's name comes from a second process, not a reconnect.
  uint64_t instance = 0;
  // Measured behaviour, which chooses among nodes (broker-jobs.cpp dispatch): attempts it
  // completed since the broker started, and their tokens per second from assignment to the
  // final (an average weighted towards the recent ones; 0 before the first).
  uint32_t completed = 0;
  double measured_rate = 0;
  // Quarantined: no jobs until quarantine_end. quarantine_ms doubles on each repeat (level).
  net::steady::time_point quarantine_end{};
  int64_t quarantined_until_ms = 0;  // the same as wall time, for node_summary
  uint32_t quarantine_level = 0;
  net::steady::time_point last_handback{};  // the latest hand-back counted as a loss

  // Heartbeat intervals of the current silence already counted as missed (the metrics).
  uint32_t missed_counted = 0;
  // Tokens it generated per second of the last k_rate_window_s seconds (steady seconds, count),
  // for its tokens-per-second gauge.
  static constexpr int k_rate_window_s = 10;
  std::deque<std::pair<int64_t, uint64_t>> recent_tokens;
  void count_tokens(net::steady::time_point now, uint64_t n);
  double tokens_per_second(net::steady::time_point now) const;

  bool quarantined(net::steady::time_point now) const { return now < quarantine_end; }
  // Losses at or after `since`.
  uint32_t losses_since(net::steady::time_point since) const;
  // Slots without a running attempt, and of those the ones it asked jobs for (its credit).
  uint32_t free_slots() const;
  uint32_t free_credit() const { return std::min(credit, free_slots()); }

  bool serves(const std::string& model) const;
  bool has_loaded(const std::string& model) const;
  // Larger is faster: a GPU node before a CPU node, then more CPU threads. A claim: it only breaks
  // ties among nodes not measured yet.
  uint64_t speed_rank() const;
  // Counts a completed attempt of `n_gen` tokens that took `seconds` from assignment.
  void measure(uint32_t n_gen, double seconds);
  // As listed to clients and stored (running: attempts assigned to it now).
  wire::node_summary summary() const;
};

// Queued jobs of one model, best first: (-priority, id). An order-statistics tree, so a job's
// queue position is O(log n) even with a hundred thousand jobs waiting.
using job_queue =
    __gnu_pbds::tree<std::pair<int64_t, uint64_t>, __gnu_pbds::null_type, std::less<>,
                     __gnu_pbds::rb_tree_tag, __gnu_pbds::tree_order_statistics_node_update>;

class broker {
 public:
  broker(broker_config cfg, std::unique_ptr<job_store> store);
  ~broker();

  // Binds and serves until `stop` becomes true (checked at least every 100 ms). Throws
  // std::runtime_error when the endpoint cannot be bound.
  void run(const std::atomic<bool>& stop);

  // The endpoint actually bound (resolves a "tcp://127.0.0.1:*" wildcard port). Valid once
  // bound() is true.
  std::string endpoint() const;
  bool bound() const { return bound_.load(); }

 private:
  struct outgoing {
    std::string routing_id;
    wire::command cmd;
    std::string body;
  };
  template <class M>
  void send(const std::string& routing_id, const M& m) {
    queue_out(routing_id, M::cmd, wire::encode(m));
  }
  // Every message of the turn goes through here. A peer whose messages of this turn and outbox
  // together pass twice max_peer_outbox_bytes (ZeroMQ takes a part of them when the peer reads)
  // gets no more this turn and is dropped at the start of the next.
  void queue_out(const std::string& routing_id, wire::command cmd, std::string body);
  // Hands the turn's messages to ZeroMQ or the outboxes, then drops the peers over a limit.
  void send_turn_output();
  // A peer that stopped reading: it watches nothing any more, a node is lost, and what it sends
  // for the next peer_stall_ms is discarded unread (so that its requests cost nothing while its
  // connection still holds the replies it did not read).
  void drop_peer(const std::string& routing_id, const std::string& why);
  // With auth, after the allow-list lost keys: the connections of a key that is gone (a node's,
  // also one whose key left nodes/) are dropped at the start of the next turn, as peers that
  // stopped reading: watches end, a node is lost and its attempts requeued.
  void drop_removed_keys();
  // Remembers the connection of a peer that asks something (a client's request, a node's hello):
  // its key (drop_removed_keys) and its descriptor (drop_peer ends it). Pruned as it grows.
  void note_connection(const std::string& routing_id, const std::string& key, net::received& msg);
  bool ignored(const std::string& routing_id, net::steady::time_point now);
  void send_error(const std::string& routing_id, uint64_t request_id, wire::error_code code,
                  std::string message);

  // Loads the unfinished jobs from the store into memory: at start, and after a turn whose
  // commit failed (reload(), which keeps the connections and watchers).
  void recover();
  void load_unfinished_jobs();
  void turn();
  // The turn's transaction failed (disk full, I/O error): nothing of it was kept, so nothing of it
  // may be told. Its messages are discarded, every client request of the turn is answered
  // storage_unavailable, and the live state is reloaded from the store (as after a restart, but
  // with the nodes still connected: each is asked to resume its attempts from what was stored).
  void storage_failed(const std::exception& e);
  void reload();
  // Writes are refused for the next backoff (250 ms, doubling to 5 s until a commit writes).
  void storage_back_off(net::steady::time_point now);
  // Whether requests that write are refused for now (after a storage failure, with backoff).
  bool storage_down(net::steady::time_point now) const { return now < storage_retry_at_; }
  void handle(net::received& msg);
  // The sender of `msg`, or nullopt (after logging) when its key is no longer allowed.
  std::optional<peer> identify(const net::received& msg);
  // Whether `who` may see and act on a job owned by `owner` (its own, or an admin).
  static bool may_access(const peer& who, const std::string& owner);
  // How a job's owner is shown: the name of its key's certificate or API key, else the key itself.
  std::string owner_name(const std::string& owner_key) const;

  // Nodes (broker-nodes.cpp).
  void on_node_hello(const std::string& rid, const peer& who, wire::node_hello m);
  void on_node_pull(node_entry& n, const wire::node_pull& m);
  void on_node_status(node_entry& n, wire::node_status m);
  void on_job_started(node_entry& n, const wire::job_started& m);
  void on_job_tokens(node_entry& n, const wire::job_tokens& m, std::string_view body);
  // Writes what a job streamed since its last flush (append_output: only the new bytes).
  void flush_output(live_job& j);
  void on_job_final(node_entry& n, const wire::job_final& m);
  void on_job_handback(node_entry& n, const wire::job_handback& m);
  // Requeues the attempt `n` gave back (job_handback, or a final saying its model file changed).
  void handed_back(node_entry& n, live_job& j, const std::string& reason);
  void node_lost(node_entry& n, const std::string& why);
  // The current attempt's stream lost tokens: job_resume asks the node for them again; after
  // k_max_resumes unanswered ones the attempt is abandoned (abandon_stream).
  void resume_stream(node_entry& n, live_job& j, const std::string& why);
  // An outstanding resume of a stream that still has a gap is sent again after k_resume_retry
  // (from timers()).
  void resume_timer(live_job& j, net::steady::time_point now);
  // The stream cannot be completed: the attempt is cancelled and the job queued again.
  void abandon_stream(node_entry& n, live_job& j, const std::string& why);
  // The attempt of `j` on `n` is lost and the job queued again. An attempt that began before a
  // broker restart lost its tokens (or its job_assign) to the restart, not to its node: that loss
  // counts neither against the node nor against max_attempts.
  void attempt_lost(node_entry& n, live_job& j, const std::string& why);
  // An attempt of `n` (job `j`'s current one) ended without finishing on the node side: counts
  // it, remembers it for node_summary, and quarantines the node after cfg_.quarantine_after such
  // losses within the window.
  void node_lost_attempt(node_entry& n, const live_job& j, const std::string& why,
                         bool handback = false);
  // Attempts that did not move on for too long are taken back (from timers()).
  void attempt_timers(net::steady::time_point now);
  // Whether another node than `except` could run `model` now (online, not quarantined).
  bool healthy_node_serves(const std::string& model, const std::string& except) const;
  // Why a job for `model` waits although it may be first in line: "" when a node could run it,
  // else which nodes serve the model and where they are ("last seen: node desk, 3h ago").
  std::string waiting_reason(const std::string& model) const;
  // Ends quarantines that are over and forgets idle hello rate limits (from timers()).
  void node_timers(net::steady::time_point now);
  // The hello rate limits: false (and the peer told limit_reached) when over them.
  bool hello_admitted(const std::string& rid);
  void store_node(const node_entry& n);
  node_entry* node_by_routing_id(const std::string& rid);

  // Decodes a client request and hands it on with the identity it acts as: `who`, or the API key
  // it presents. A malformed one gets error_reply(malformed), an unknown key unauthorized.
  template <class M, class F>
  void client_request(const std::string& rid, const peer& who, std::string_view body,
                      F&& handle_request);

  // API keys (broker-api-keys.cpp). The identity of the key `secret`, or nullopt after replying
  // unauthorized (unknown or revoked key, or a peer that may not present one).
  std::optional<peer> api_key_peer(const std::string& rid, uint64_t request_id, const peer& who,
                                   const std::string& secret);
  void load_api_keys();
  void on_whoami(const std::string& rid, const peer& who, const wire::whoami& m);
  void on_create_api_key(const std::string& rid, const wire::create_api_key& m);
  void on_list_api_keys(const std::string& rid, const wire::list_api_keys& m);
  void on_revoke_api_key(const std::string& rid, const wire::revoke_api_key& m);

  // Clients (broker-clients.cpp).
  void on_submit(const std::string& rid, const peer& who, wire::submit m);
  void on_watch(const std::string& rid, const peer& who, const wire::watch& m);
  // An attempt's output from `from` on as job_tokens chunks of at most a page, up to about
  // max_bytes; the chunk that reaches the end of `output` brings the count to end_seq. Returns
  // what the watcher then has. The catch-up of a watch, and of a lagging watcher.
  output_mark send_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                               output_mark from, uint64_t end_seq, const std::string& output,
                               uint64_t max_bytes);
  // The pages of `window`, bytes [base, base + window.size()) of an attempt's `total` bytes.
  output_mark send_output_window(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                 output_mark from, uint64_t end_seq, std::string_view window,
                                 uint64_t base, uint64_t total, uint64_t max_bytes);
  // Makes `rid` a watcher of the job: its state now, then its output from what `has` says the
  // watcher already has (wire::watch's attempt, seq and output_offset), then its events.
  void watch_job(const std::string& rid, uint64_t job_id, const wire::watch& has);
  // A request that writes, while the store refuses writes: answered storage_unavailable.
  bool refuse_while_storage_down(const std::string& rid, uint64_t request_id);
  // The same for a finished job, whose output is read from the store a page at a time.
  output_mark send_stored_output_from(const std::string& rid, uint64_t job_id, uint32_t attempt,
                                      output_mark from, uint64_t end_seq, uint64_t total_bytes,
                                      uint64_t max_bytes);
  // A job event to one watcher. Token chunks to a watcher whose pipe is full are not queued: it
  // is marked lagging and catch_up_lagging() sends what it missed in pages once it reads again
  // (before job_done at the latest), so a slow watcher of a fast stream costs its backlog once,
  // in the job's output, not again in per-chunk messages.
  void deliver(const live_job& j, const std::string& rid, wire::command cmd,
               const std::string& body);
  void catch_up_lagging();
  void on_cancel(const std::string& rid, const peer& who, const wire::cancel& m);
  void on_list_jobs(const std::string& rid, const peer& who, const wire::list_jobs& m);
  void on_get_job(const std::string& rid, const peer& who, const wire::get_job& m);
  void on_list_nodes(const std::string& rid, const wire::list_nodes& m);
  void on_list_models(const std::string& rid, const wire::list_models& m);
  void on_forget_node(const std::string& rid, const wire::forget_node& m);
  void on_release_node(const std::string& rid, const wire::release_node& m);
  void on_prune_jobs(const std::string& rid, const wire::prune_jobs& m);
  // Metrics (broker-metrics.cpp): the counters and histograms, and the families read off the
  // state (gauges, and the message counts below).
  void on_get_metrics(const std::string& rid, const wire::get_metrics& m);
  void append_state_metrics(std::vector<wire::metric_family>& out) const;
  // A message came from `rid` (hearth_broker_peers).
  void note_peer(const std::string& rid);
  // Counts the heartbeat intervals `n` has been silent for, each once (timers()).
  void count_missed_heartbeats(node_entry& n, net::steady::time_point now);
  // One bounded batch of the pending prune requests and of the retention policy (timers()).
  void prune_step(net::steady::time_point now);
  // The job `job_id` if `who` may see and act on it: the live row, or the stored one read into
  // `stored`. nullptr after replying not_found or unauthorized.
  const job_row* visible_job(const std::string& rid, const peer& who, uint64_t request_id,
                             uint64_t job_id, std::optional<job_row>& stored);

  // Jobs (broker-jobs.cpp): the one place that changes a live job's state.
  void enqueue(live_job& j);
  void dispatch();
  void assign(live_job& j, node_entry& n);
  // The running attempt ended without finishing the job: queue it again, or fail it after
  // max_attempts (or finish it as cancelled when a cancel was pending). Every such end is on the
  // node side (a node that fails a job sends job_final failed, which finishes it), so the attempt
  // does not count towards max_attempts when another healthy node serves the model, nor ever
  // when it was handed back; max_total_attempts bounds the job in any case.
  // broker_restart: the attempt was lost because the broker restarted (its node did not come back
  // in time), which never counts towards max_attempts either.
  enum class loss { node, handback, broker_restart };
  void requeue(live_job& j, const std::string& why, loss cause = loss::node);
  void finish(live_job& j, wire::job_state state, const std::string& stop_reason,
              const std::string& error, uint32_t n_prompt, uint32_t n_gen);
  void notify(const live_job& j, wire::command cmd, const std::string& body);
  uint32_t queue_position(const live_job& j) const;
  void timers();
  // The per-client accounting of unfinished jobs: a job is counted from its submit (or recovery)
  // until it leaves memory.
  void usage_add(live_job& j);
  void usage_release(const live_job& j);
  void erase_finished_jobs();

  broker_config cfg_;
  std::unique_ptr<job_store> store_;
  broker_metrics metrics_;
  metrics_turn turn_metrics_;  // this turn's job counts, kept once it commits
  int64_t started_ms_ = 0;     // wall clock, for hearth_broker_start_time_seconds
  // Peers heard from lately (routing id -> when), pruned every tick: hearth_broker_peers.
  std::unordered_map<std::string, net::steady::time_point> recent_peers_;
  bool turn_did_work_ = false;  // the turn handled a message or sent one (turn duration)
  // Messages by command code, counted on the hot path without an allocation or a lookup;
  // received ones whose envelope did not open are `invalid`.
  std::array<uint64_t, 256> messages_received_{}, messages_sent_{};
  uint64_t messages_invalid_ = 0;
  zmq::context_t ctx_;
  std::optional<allow_list> auth_;  // with --auth: the keys allowed, rescanned every second
  std::unique_ptr<zap_handler> zap_;
  api_key_registry api_keys_;  // the store's api_keys table, kept in step with it
  net::steady::time_point next_auth_refresh_{};
  net::steady::time_point next_auth_check_{};  // the folders' times, every 100 ms
  uint64_t auth_generation_ = 0;               // the allow-list's, at the last drop_removed_keys
  // Connections by routing id (note_connection), and the map's size after it was last pruned.
  struct connection {
    std::string key;  // with auth
    peer_connection conn;
  };
  std::unordered_map<std::string, connection> connections_;
  size_t connections_kept_ = 0;
  // Lines a peer can provoke: messages of a key no longer allowed or of the wrong role, refused
  // node_hellos, dropped peers.
  log_limiter auth_log_{0.1, 1};
  log_limiter hello_log_{1, 5};
  log_limiter drop_log_{1, 1};
  std::unique_ptr<zmq::socket_t> router_;
  std::atomic<bool> bound_{false};
  std::string endpoint_;

  std::unordered_map<uint64_t, live_job> jobs_;
  // Queued job ids per model, best first: priority (higher first), then age (lower id first).
  std::map<std::string, job_queue> queues_;
  std::vector<uint64_t> finished_;  // jobs finished this turn, erased from jobs_ at its end
  size_t n_queued_ = 0;
  std::map<std::string, node_entry> nodes_;                   // by name
  std::unordered_map<std::string, std::string> node_by_rid_;  // routing id -> name
  std::set<std::string> known_models_;
  // node_hello rate limits: per connection (by routing id) and overall; refusals are logged at
  // most once a second, with a count of those not logged.
  std::unordered_map<std::string, token_bucket> hello_peer_buckets_;
  std::optional<token_bucket> hello_bucket_;
  std::vector<outgoing> out_;
  peer_outboxes outboxes_;
  std::vector<peer_outboxes::overflow> to_drop_;  // peers to drop at the start of the next turn
  std::unordered_map<std::string, uint64_t> turn_bytes_;  // queued this turn, by routing id
  static constexpr uint64_t k_peer_dropped = UINT64_MAX;  // turn_bytes_: it gets nothing more
  std::unordered_map<std::string, net::steady::time_point> dropped_until_;  // ignored till then
  // A watcher behind on a job's stream: what it has, and once the job finished, its output and
  // job_done, sent after the rest of the output.
  // Once the job has finished, the rest is read from the store (whose output is whole by then).
  struct watcher_lag {
    output_mark has;
    uint32_t attempt = 0;
    bool finished = false;
    uint64_t final_seq = 0;
    uint64_t final_bytes = 0;
    std::string done_body;
  };
  std::map<std::pair<uint64_t, std::string>, watcher_lag> lagging_;  // by (job, watcher)
  std::unordered_map<std::string, client_usage> usage_;              // by owner
  uint64_t queued_bytes_ = 0;                                        // of all unfinished jobs
  bool dispatch_needed_ = false;
  // Client requests handled this turn (routing id, request id): answered storage_unavailable
  // when the turn's commit fails.
  std::vector<std::pair<std::string, uint64_t>> turn_requests_;
  // What the watchers of each job relayed to this turn had been sent before it: when the turn's
  // commit fails its messages are never sent, so the reload goes back to these marks.
  std::unordered_map<uint64_t, output_mark> relayed_before_turn_;
  net::steady::time_point storage_retry_at_{};
  // The reload after a storage failure could not read the database either: nothing is handled
  // until it succeeds (messages wait in ZeroMQ), tried again with the same backoff.
  bool reload_pending_ = false;
  std::chrono::milliseconds storage_backoff_{0};
  // prune_jobs requests being worked through, a batch per turn, then answered.
  struct pending_prune {
    std::string routing_id;
    uint64_t request_id = 0;
    retention rule;
    uint64_t pruned = 0;
  };
  std::deque<pending_prune> prunes_;
  net::steady::time_point next_retention_{};
  bool retention_more_ = false;  // the last retention batch was full: another one next turn
  net::steady::time_point next_tick_{};
  net::steady::time_point next_flush_{};
  net::steady::time_point next_positions_{};
};

}  // namespace hearth::broker
