// The node daemon's network side: one DEALER connection to the broker (schema/PROTOCOL.md),
// hello and reconnection with backoff, credit-based pulling, heartbeats, and relaying the
// engine's progress in small batches.
//
// Threads: run() owns the socket and never waits on the engine, so heartbeats keep flowing while
// a model loads or a batch runs. The engine reports from its own threads into a queue that wakes
// run() through an eventfd it polls beside the socket.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "node/config.h"
#include "node/job-engine.h"

namespace hearth::node {

class node_daemon {
 public:
  // Loads the CURVE keys and creates the engine (scanning the models directory). Throws
  // std::runtime_error on a bad configuration, an unreadable key file or models directory.
  explicit node_daemon(node_config cfg);
  ~node_daemon();

  // Serves until `stop` becomes true, then drains: no more pulls, running jobs get
  // cfg.drain_timeout_ms to finish, the rest are handed back, and the node says goodbye.
  // Returns 0, or 1 when the broker refused the node (name taken, version mismatch).
  int run(const std::atomic<bool>& stop);
  // The broker's message when run() returned 1 because the broker refused the node (the name is
  // bound to another node's key, another protocol version); empty otherwise.
  const std::string& refusal() const;

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace hearth::node
