// The transfers the broker directs (schema/PROTOCOL.md section 16), as a table: their ids, what
// the target node reports of each (state, bytes), their deadlines, the bytes already counted in
// the metrics, and the last finished ones kept for models_reply.
//
// Its own class because this bookkeeping is the same for a pull and a copy and needs none of the
// planning (model-placement.h decides what starts, onto which node, from which holders, and
// whether a failed copy is sent again): a transfer's state changes only here (report, finish,
// expire). In memory only: a broker restart forgets them (a node that finishes one afterwards
// still advertises the model).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "broker/metrics.h"
#include "broker/node-match.h"
#include "schema/messages.h"
#include "schema/zmq-io.h"

namespace hearth::broker {

// A transfer onto a node: a pull from a source, or a copy from holders.
struct model_transfer {
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

class transfer_table {
 public:
  // Finished transfers kept for models_reply, newest last.
  static constexpr size_t k_finished_kept = 64;
  // No transfer_status this long after the model_fetch (an older node drops the command), or this
  // long between two while it runs: the transfer fails.
  static constexpr std::chrono::seconds k_start_timeout{30};
  static constexpr std::chrono::seconds k_report_timeout{60};
  // A transfer's error and a pull's name as listed, at most (models_reply lists 64 of them).
  static constexpr size_t k_max_error_bytes = 512;

  explicit transfer_table(broker_metrics& metrics) : metrics_(metrics) {}

  // The id of a new transfer; taken even when the transfer does not start (ids are never reused).
  uint64_t next_id() { return next_id_++; }
  // A transfer started (its model_fetch sent): live until it finishes.
  model_transfer& add(model_transfer t);

  // A live transfer of `model` onto `node`, if any.
  model_transfer* running(const std::string& model, const std::string& node);
  // The node a live copy of `model` goes to, "" when none does.
  std::string copying(const std::string& model) const;
  // Live transfers onto `node`, copies that name `holder` among their peers, and all of them.
  uint32_t onto(const std::string& node) const;
  uint32_t copies_from(const std::string& holder) const;
  size_t live_count() const { return live_.size(); }

  // A node's transfer_status of a transfer onto it: its progress and bytes recorded; running or
  // done. A transfer that failed as its node went offline is live again when the node goes on
  // with it. Returns the transfer when `m` says it failed (the caller sends it again or
  // finish()es it), else nullptr. `m.error` is cut to k_max_error_bytes.
  model_transfer* report(const node_entry& node, wire::transfer_status& m);
  // Ends a live transfer: done or failed (with why), counted, kept among the finished.
  void finish(uint64_t id, const std::string& state, const std::string& error);
  // The deadlines: a transfer whose target went offline, that was not answered within
  // k_start_timeout or not reported on for k_report_timeout fails. `renew` gets each other copy
  // whose tickets are due (now >= next_tickets) and sets when they are due next.
  void expire(net::steady::time_point now, const node_map& nodes,
              const std::function<void(model_transfer&)>& renew);

  // Live transfers (by id), then the last finished ones (newest first), at most `max`.
  std::vector<wire::transfer_info> listing(size_t max = k_finished_kept) const;
  // Live transfers by state (starting, running), for the metrics' gauge.
  std::map<std::string, size_t> live_by_state() const;

 private:
  void count_bytes(model_transfer& t, const wire::transfer_status& m);

  broker_metrics& metrics_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, model_transfer> live_;  // starting or running
  std::deque<model_transfer> finished_;      // newest last, at most k_finished_kept
};

}  // namespace hearth::broker
