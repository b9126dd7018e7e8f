// The last stage's side of a pipeline (schema/PROTOCOL.md 17): the node that runs a split
// model's jobs holds its last layers and the output head, and runs each decode step round the
// ring. The batch engine calls run() with the step's tokens (and the cache changes made since
// the last step); the link sends them to the first stage, and returns the hidden rows that the
// stage before this one sends back, for the engine's own context (engine/context.h decode with
// `hidden`) to finish. The stage host (node/stage-host.h) delivers what arrives.
//
// Threads: run() and the cache-op calls belong to the engine's thread (the socket to the first
// stage is made and used there); deliver() and close() come from the stage host's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/result.h"
#include "engine/context.h"
#include "engine/layer-range.h"
#include "node/stage-message.h"
#include "schema/curve-cert.h"
#include "schema/messages.h"

namespace hearth::node {

class pipeline_link {
 public:
  // `assign` makes this node the pipeline's last stage.
  pipeline_link(wire::stage_assign assign, net::curve_cert own_key,
                std::chrono::milliseconds step_timeout);
  ~pipeline_link();
  pipeline_link(const pipeline_link&) = delete;
  pipeline_link& operator=(const pipeline_link&) = delete;

  const wire::stage_assign& assignment() const { return assign_; }
  // The layers this node holds.
  layer_range range() const;
  // "stage 2 of 3 (layers 20-32) of pipeline 7": for logs and errors.
  std::string describe() const;

  // Cache changes every stage makes before the next step's tokens, so that their caches stay
  // what this node's is: the first step of a link opens the stages' contexts (n_seq sequences of
  // n_ctx_per_seq cells).
  void open(int32_t n_seq, int32_t n_ctx_per_seq);
  void seq_clear(int32_t seq) { ops_.push_back({"seq_clear", seq, 0}); }
  void seq_copy(int32_t src, int32_t dst) { ops_.push_back({"seq_copy", src, dst}); }

  // Runs `batch` through the stages before this one: the rows entering this node's first layer,
  // batch.size() × n_embd F32 in batch order. Sent in pieces of at most max_stage_tokens (a
  // multiple of n_batch, so each stage decodes the chunks a whole model would). An error when a
  // stage failed the step, none answered within the step timeout, or the link was closed; every
  // stage's cache is then unknown and the caller must not use the link again.
  result<std::vector<float>> run(std::span<const batch_token> batch, uint32_t n_embd,
                                 int32_t n_batch);

  // From the stage host's thread: a stage_batch for this pipeline from the stage before this one.
  void deliver(stage_message m);
  // The pipeline was released or re-planned: run() fails from now on.
  void close(std::string why);
  // Whether close() was called: a step that failed then may go on with the pipeline's next
  // version (a failover); one that failed on an open link failed for good (a stage's error).
  bool closed() const;

 private:
  result<std::vector<float>> run_piece(std::span<const batch_token> piece, uint32_t n_embd);

  // Its own ZeroMQ context: the link lives as long as the engine's model holds it, which may be
  // after the stage host (and its context) has gone.
  zmq::context_t zctx_;
  const wire::stage_assign assign_;
  const net::curve_cert key_;
  const std::chrono::milliseconds timeout_;
  std::optional<zmq::socket_t> out_;  // to the first stage; the engine's thread only
  std::vector<wire::stage_op> ops_;   // the engine's thread only
  uint64_t step_ = 0;
  bool broken_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<stage_message> inbox_;
  std::string closed_;  // why, once closed
};

}  // namespace hearth::node
