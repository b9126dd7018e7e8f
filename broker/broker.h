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
// catches up from the job's output in pages when it reads again (watch-relay.h).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "broker/allow-list.h"
#include "broker/api-key-service.h"
#include "broker/client-sessions.h"
#include "broker/command-dispatch.h"
#include "broker/config.h"
#include "broker/job-history.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/log-limiter.h"
#include "broker/metrics-report.h"
#include "broker/metrics.h"
#include "broker/model-placement.h"
#include "broker/node-attempts.h"
#include "broker/node-registry.h"
#include "broker/peer-gate.h"
#include "broker/peer-outbox.h"
#include "broker/peer.h"
#include "broker/storage-gate.h"
#include "broker/storage-recovery.h"
#include "broker/turn-output.h"
#include "broker/turn-timers.h"
#include "broker/watch-relay.h"
#include "broker/zap-handler.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

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
  // Hands the turn's messages to ZeroMQ or the outboxes, then drops the peers over a limit.
  void send_turn_output();
  // A peer that stopped reading: it watches nothing any more, a node is lost, and what it sends
  // for the next peer_stall_ms is discarded unread (so that its requests cost nothing while its
  // connection still holds the replies it did not read).
  void drop_peer(const std::string& routing_id, const std::string& why);
  // Remembers the connection of a peer that asks something (a client's request, a node's hello):
  // its key (drop_removed_keys) and its descriptor (drop_peer ends it). Pruned as it grows.
  void note_connection(const std::string& routing_id, const std::string& key, net::received& msg);

  void turn();
  // Whether requests that write are refused for now (after a storage failure, with backoff).
  bool storage_down(net::steady::time_point now) const { return storage_.down(now); }
  // A message: the gate's checks, its connection noted, then by its command to its part.
  void handle(net::received& msg);

  broker_config cfg_;
  std::unique_ptr<job_store> store_;
  broker_metrics metrics_;
  peer_outboxes outboxes_;
  turn_output out_;                  // the turn's messages, sent once it commits
  node_registry nodes_;              // node-registry.h
  watch_relay relay_;                // watchers and their catch-up (watch-relay.h)
  metrics_report report_{metrics_};  // get_metrics (metrics-report.h)
  metrics_turn turn_metrics_;        // this turn's job counts, kept once it commits
  // The live jobs and their state machine (job-table.h).
  // Models split across nodes (pipelines.h).
  pipeline_table pipelines_{cfg_, nodes_, out_};
  job_table jobs_{cfg_, *store_, out_, relay_, nodes_, turn_metrics_, pipelines_};
  // What nodes say about their attempts (node-attempts.h).
  node_attempts attempts_{cfg_, *store_, out_, jobs_, nodes_, relay_, turn_metrics_};
  bool turn_did_work_ = false;  // the turn handled a message or sent one (turn duration)
  zmq::context_t ctx_;
  std::optional<allow_list> auth_;  // with --auth: the keys allowed, rescanned every second
  std::unique_ptr<zap_handler> zap_;
  // Lines a peer can provoke: messages of a key no longer allowed or of the wrong role, refused
  // API keys, dropped peers.
  log_limiter auth_log_{0.1, 1};
  log_limiter drop_log_{1, 1};
  peer_gate gate_{cfg_, auth_, out_, outboxes_, metrics_, auth_log_};  // peer-gate.h
  storage_gate storage_;  // whether the store takes writes (after a failed commit: a backoff)
  api_key_service api_keys_{*store_, out_, storage_, metrics_, auth_log_};
  client_sessions clients_{cfg_, *store_, out_, storage_, jobs_, nodes_, relay_, turn_metrics_};
  job_history history_{cfg_, *store_, out_, storage_, jobs_, nodes_, api_keys_, auth_};
  // A failed commit's undoing and reload, and the load at start (storage-recovery.h).
  storage_recovery recovery_{*store_,   storage_, out_,      jobs_,    nodes_,
                             attempts_, relay_,   api_keys_, history_, turn_metrics_};
  // Models: who holds what, the transfers between nodes (model-placement.h).
  model_placement placement_{cfg_, nodes_, out_, metrics_};
  // Each message, by its command, to the part that owns it (command-dispatch.h).
  command_dispatch commands_{*store_,  out_,      storage_, jobs_, nodes_,     attempts_, clients_,
                             history_, api_keys_, report_,  zap_,  placement_, pipelines_};
  // The turn's timers: heartbeats, attempts, flushes, queue positions, pruning (turn-timers.h).
  turn_timers timers_{cfg_,   storage_, nodes_,   jobs_,     attempts_,
                      relay_, report_,  history_, placement_};
  std::unique_ptr<zmq::socket_t> router_;
  std::atomic<bool> bound_{false};
  std::string endpoint_;
};

}  // namespace hearth::broker
