// The transfers onto this node (schema/PROTOCOL.md 16.2): each model_fetch runs on a worker
// thread of its own, a pull from the internet (pull/pull.h) or a copy from peers
// (transfer-fetch.h), while the node's loop goes on serving jobs. The loop asks due() every pass
// for the transfer_status messages to send: a running transfer's about every second, a finished
// one's once, after which the worker is joined.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "node/transfer-fetch.h"
#include "schema/messages.h"
#include "store/model-store.h"

namespace hearth::node {

// A pull from the internet into the store (pull::pull_model on the node), reporting its progress;
// throws std::exception with the reason when it fails. Injected so that the runner's tests need
// no HTTP server.
struct pull_report {
  uint64_t bytes_done = 0, bytes_total = 0;
};
using pull_fn = std::function<store::manifest(
    store::model_store&, const wire::model_fetch&, const std::set<std::string>& in_use,
    const std::function<void(const pull_report&)>&, const std::atomic<bool>* cancel)>;

struct transfer_runner_config {
  fetch_options fetch;
  pull_fn pull;              // empty: pulls are refused
  uint32_t max_running = 4;  // transfers at once onto this node (the broker sends at most 2)
  std::chrono::milliseconds status_every{1000};
};

class transfer_runner {
 public:
  transfer_runner(store::model_store& store, transfer_runner_config cfg);
  // Cancels the transfers still running (their partial blobs stay) and joins them.
  ~transfer_runner();
  transfer_runner(const transfer_runner&) = delete;
  transfer_runner& operator=(const transfer_runner&) = delete;

  // Starts the transfer and returns its first transfer_status: running, or failed at once (too
  // many running, a pull without a puller). A transfer_id already running is not started again
  // (its current status is returned). When the store's size limit leaves too little room, the
  // least recently used models are evicted first, never one named in `in_use` (loaded now).
  wire::transfer_status start(const wire::model_fetch& m, std::set<std::string> in_use);
  // The statuses to send now. `models_added` becomes true when a transfer finished done (the
  // catalog should rescan and the node send node_status).
  std::vector<wire::transfer_status> due(std::chrono::steady_clock::time_point now,
                                         bool& models_added);
  size_t running() const;

 private:
  struct transfer;
  void work(transfer& t, const wire::model_fetch& m, const std::set<std::string>& in_use);

  store::model_store& store_;
  transfer_runner_config cfg_;
  std::map<uint64_t, std::unique_ptr<transfer>> transfers_;  // the node loop's thread only
};

}  // namespace hearth::node
