// Models flowing through the homelab, the broker's side (schema/PROTOCOL.md section 16): which
// online node holds which model (by digest, from what the nodes advertise), the transfers the
// broker directs (a pull from the internet onto a node, a copy from holders onto a node), the
// tickets holders get for a copy, evictions, and the on-demand placement of a model a queued job
// needs (auto_place).
//
// Its own class because transfers are state of their own (ids, progress, retries, deadlines) that
// no job or node record owns, and so that "who may copy what from whom" is decided in one place.
// The broker never copies bytes: it tells nodes what to fetch and from whom, and records what
// they report (transfer_status). Transfers live in memory only: a broker restart forgets them (a
// node that finishes one afterwards still advertises the model).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/config.h"
#include "broker/live-job.h"
#include "broker/metrics.h"
#include "broker/node-registry.h"
#include "broker/turn-output.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// The digest the broker lists for `model`: the first online node's (by name) that sent one; ""
// when none did.
std::string listed_digest(const node_map& nodes, const std::string& model);
// The online nodes that advertise `model` with `digest` (its holders), by name.
std::vector<std::string> model_holders(const node_map& nodes, const std::string& model,
                                       const std::string& digest);

class model_placement {
 public:
  // Finished transfers kept for models_reply, newest last.
  static constexpr size_t k_finished_kept = 64;
  // No transfer_status this long after the model_fetch (an older node drops the command), or this
  // long between two while it runs: the transfer fails.
  static constexpr std::chrono::seconds k_start_timeout{30};
  static constexpr std::chrono::seconds k_report_timeout{60};
  // A ticket lapses after this long without a request; the broker renews a running copy's tickets
  // every k_ticket_renew, so a holder further down `peers` still lets the fetcher in when the
  // ones before it fail late in a long copy.
  static constexpr uint32_t k_ticket_ttl_ms = 120000;
  static constexpr std::chrono::seconds k_ticket_renew{30};

  model_placement(const broker_config& cfg, node_registry& nodes, turn_output& out,
                  broker_metrics& metrics)
      : cfg_(cfg), nodes_(nodes), out_(out), metrics_(metrics) {}

  // Admin requests (peer_gate refuses them to other roles): answered transfers_started, ok, or an
  // error naming what is wrong.
  void pull(const std::string& rid, const wire::pull_model& m);
  void place(const std::string& rid, const wire::place_model& m);
  void evict(const std::string& rid, const wire::evict_model& m);

  // A node reports on a transfer onto it.
  void on_status(const node_entry& node, wire::transfer_status m);
  // A transfer's error and a pull's name as listed, at most (models_reply lists 64 of them).
  static constexpr size_t k_max_error_bytes = 512;
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

  // Running transfers (by id), then the last finished ones (newest first), at most `max`.
  std::vector<wire::transfer_info> listing(size_t max = k_finished_kept) const;
  // Transfers not finished, by state (starting, running), for the metrics' gauge.
  std::map<std::string, size_t> live_by_state() const;

 private:
  struct transfer {
    wire::transfer_info info;
    bool copy = false;
    std::string digest;                          // a copy: the model's
    std::vector<wire::model_file> files;         // a copy: what to fetch
    std::string origin;                          // a copy: the source the holder recorded
    std::string pull_source, pull_name, sha256;  // a pull, to send it again
    std::vector<std::string> peers;              // a copy: the holders given, in order
    uint32_t retries = 0;                        // a failed copy is sent again once
    net::steady::time_point sent{}, last_report{}, next_tickets{};
    uint64_t counted_internet = 0, counted_peers = 0;  // bytes already added to the metrics
    std::set<uint64_t> jobs_told;  // auto_place: jobs whose history says they wait for it
  };

  // The checks every pull and place makes of a target: online, a store, within the bounds. "" or
  // why not (`code` set).
  std::string refuse_target(const node_entry* n, const std::string& name,
                            wire::error_code& code) const;
  // A running transfer of `model` onto `node`, if any.
  transfer* running(const std::string& model, const std::string& node);
  // Starts a copy of `model` (with `digest`) onto `target`, from the holders; nullopt when no
  // holder can serve it.
  std::optional<wire::transfer_info> start_copy(const std::string& model, const std::string& digest,
                                                node_entry& target);
  // Sends `t`'s tickets and model_fetch (again, for a retry) from the holders online now.
  bool send_copy(transfer& t);
  void send_tickets(const transfer& t);
  void finish(uint64_t id, const std::string& state, const std::string& error);
  void count_bytes(transfer& t, const wire::transfer_status& m);
  uint32_t copies_from(const std::string& holder) const;
  uint32_t transfers_onto(const std::string& node) const;

  const broker_config& cfg_;
  node_registry& nodes_;
  turn_output& out_;
  broker_metrics& metrics_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, transfer> live_;  // starting or running
  std::deque<transfer> finished_;      // newest last, at most k_finished_kept
};

}  // namespace hearth::broker
