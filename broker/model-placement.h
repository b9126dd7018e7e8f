// Models flowing through the homelab, the broker's side (schema/PROTOCOL.md section 16): the
// planning of transfers. Which nodes a pull or a copy goes to (online, with a store, within the
// bounds), from which holders a copy comes (model-holders.h) and their tickets, evictions, a
// failed copy sent once more, and the on-demand placement of a model a queued job needs
// (auto_place).
//
// Its own class so that "who may copy what from whom" is decided in one place; what becomes of a
// transfer once started (progress, deadlines, the finished ones) is the transfer table's
// (transfer-table.h). The broker never copies bytes: it tells nodes what to fetch and from whom,
// and records what they report (transfer_status).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/config.h"
#include "broker/live-job.h"
#include "broker/metrics.h"
#include "broker/model-holders.h"
#include "broker/node-registry.h"
#include "broker/transfer-table.h"
#include "broker/turn-output.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

class model_placement {
 public:
  // A ticket lapses after this long without a request; the broker renews a running copy's tickets
  // every k_ticket_renew, so a holder further down `peers` still lets the fetcher in when the
  // ones before it fail late in a long copy.
  static constexpr uint32_t k_ticket_ttl_ms = 120000;
  static constexpr std::chrono::seconds k_ticket_renew{30};

  model_placement(const broker_config& cfg, node_registry& nodes, turn_output& out,
                  broker_metrics& metrics)
      : cfg_(cfg), nodes_(nodes), out_(out), transfers_(metrics) {}

  // Admin requests (peer_gate refuses them to other roles): answered transfers_started, ok, or an
  // error naming what is wrong.
  void pull(const std::string& rid, const wire::pull_model& m);
  void place(const std::string& rid, const wire::place_model& m);
  void evict(const std::string& rid, const wire::evict_model& m);

  // A node reports on a transfer onto it (recorded by the table; a failed copy sent once more).
  void on_status(const node_entry& node, wire::transfer_status m);
  // Deadlines, targets gone offline, tickets renewed (the heartbeat timer).
  void timers(net::steady::time_point now);

  // auto_place: a queued job for `model` that no online node can run now. When an online node
  // holds the model and another online node could hold it, a copy onto the best-fitting one (most
  // free memory) starts, unless one runs already. Returns the node it goes to ("" when none).
  std::string place_for_job(const std::string& model);
  // auto_place for every model whose queued jobs wait (`waiting`: why, "" when a node can run
  // them): each of its jobs gets `note`(job id, "waiting for placement of MODEL on NODE") once.
  void auto_place(const std::map<std::string, job_queue>& queues,
                  const std::function<std::string(const std::string&)>& waiting,
                  const std::function<void(uint64_t, const std::string&)>& note);
  static constexpr size_t k_jobs_told_per_tick = 256;

  // The transfers, for list_models and the metrics (listing(), live_by_state()).
  const transfer_table& transfers() const { return transfers_; }

 private:
  // The checks every pull and place makes of a target: online, a store, within the bounds. "" or
  // why not (`code` set).
  std::string refuse_target(const node_entry* n, const std::string& name,
                            wire::error_code& code) const;
  // Starts a copy of `model` (with `digest`) onto `target`, from the holders; nullopt when no
  // holder can serve it.
  std::optional<wire::transfer_info> start_copy(const std::string& model, const std::string& digest,
                                                node_entry& target);
  // Sends `t`'s tickets and model_fetch (again, for a retry) from the holders online now.
  bool send_copy(model_transfer& t);
  void send_tickets(const model_transfer& t);

  const broker_config& cfg_;
  node_registry& nodes_;
  turn_output& out_;
  transfer_table transfers_;
};

}  // namespace hearth::broker
