// A node's pipeline stages and its stage socket (schema/PROTOCOL.md 17): a ROUTER on its own
// thread where the stage before this node's in a pipeline sends each step (stage_batch). For a
// stage that is not the last, the host holds the stage's layers (loaded through `stage_loader`
// from the node's own copy of the model) and their cache, applies each step's cache ops, runs the
// step's tokens through its layers and sends the rows on to the next stage. For the last stage
// the batch engine computes (its pipeline_link); the host only hands it what arrives.
//
// Trust: with the node's key the socket is a CURVE server, and a step is taken only from the key
// of the stage before this one in that pipeline and version (the broker's stage_assign names
// it); anything else is dropped with a log line (at most one a second). Bounded: at most
// max_pipelines stages per node, the sizes of stage_message_read, and the cache a step may open
// within the node's memory limit.
//
// Threads: assign() and release() come from the node's loop and are carried out on the host's
// thread (a stage's load takes that thread for its duration; steps of other pipelines wait).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/layer-range.h"
#include "engine/model.h"
#include "node/pipeline-link.h"
#include "schema/curve-cert.h"
#include "schema/messages.h"

namespace hearth::node {

// Loads layers `r` of the node's model `name` (its catalog, its backend), or says why not.
using stage_loader =
    std::function<result<std::unique_ptr<model>>(const std::string& name, layer_range r)>;

struct stage_host_options {
  std::string endpoint = "tcp://0.0.0.0:7713";  // "tcp://127.0.0.1:*" picks a free port
  net::curve_cert key;                          // the node's key pair; empty: no CURVE
  uint32_t max_pipelines = 16;
  uint64_t memory_limit = 0;  // what the stages' weights and caches may take; 0: no limit
  // Called on the host's thread with what the stages hold now, whenever it changes (the node
  // tells its engine, whose models fit the rest: job_engine::set_stage_memory).
  std::function<void(uint64_t)> on_memory;
  std::chrono::milliseconds step_timeout{60000};
};

struct stage_host_stats {
  uint64_t steps = 0;    // steps computed and sent on
  uint64_t dropped = 0;  // messages refused
  uint64_t held = 0;     // steps waiting for their pipeline's assignment now
};

class stage_host {
 public:
  // Binds and starts the thread. Throws std::runtime_error (naming the endpoint) when it cannot
  // bind.
  stage_host(stage_host_options opts, stage_loader load);
  ~stage_host();
  stage_host(const stage_host&) = delete;
  stage_host& operator=(const stage_host&) = delete;

  uint16_t port() const { return port_; }
  const std::string& public_key() const { return opts_.key.public_key; }

  // The broker's messages. An assignment replaces the pipeline's earlier one.
  void assign(const wire::stage_assign& a);
  void release(uint64_t pipeline_id);

  // The link of a pipeline whose last stage this node is, once assigned; null otherwise.
  std::shared_ptr<pipeline_link> driver(uint64_t pipeline_id) const;

  stage_host_stats stats() const;

 private:
  struct stage;
  struct sockets;
  void serve();
  void apply_control();
  void take(stage& s, const std::string& from_key, stage_message m);
  // What the stages hold (weights, caches), and on_memory told when it changed.
  uint64_t stage_memory(const stage* except = nullptr) const;
  void report_memory();
  uint64_t reported_memory_ = 0;
  void drop(const std::string& why);

  stage_host_options opts_;
  stage_loader load_;
  std::unique_ptr<sockets> socks_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable std::mutex mu_;                    // guards what follows
  std::vector<wire::stage_assign> assigns_;  // to apply on the host's thread
  std::vector<uint64_t> releases_;
  std::map<uint64_t, std::shared_ptr<pipeline_link>> drivers_;
  stage_host_stats stats_;

  // The host's thread only.
  std::map<uint64_t, std::unique_ptr<stage>> stages_;
  // Steps of a pipeline or version this node has not been assigned yet: the broker's
  // stage_assign and the neighbour's first step race (they come over different connections), so
  // such a step waits here until the assignment arrives (at most k_hold, k_held_max of them).
  struct held_step {
    std::chrono::steady_clock::time_point since;
    std::string from_key;
    stage_message m;
  };
  std::vector<held_step> held_;
  // Why a step from `from_key` is refused by its header alone, before its rows are decoded: ""
  // when it is not (a step not assigned here yet is held: route() decides once it is).
  std::string refuse_sender(const wire::stage_batch& head, const std::string& from_key) const;
  std::string key_refused(const stage& s, const std::string& from_key) const;
  // A step to its stage: true when taken or dropped, false when it is to be held.
  bool route(const std::string& from_key, stage_message& m);
  std::chrono::steady_clock::time_point last_drop_log_{};
};

}  // namespace hearth::node
