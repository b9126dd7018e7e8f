// Planning a pipeline split (issue 55): which online nodes hold which layers of
// a model that no single node can hold. A pure function of what nodes advertise, so that the
// broker's choice can be tested without a broker: the model's per-layer sizes and each node's
// capacity and measured weight-streaming rate in, stages or a refusal that says how much memory
// is missing out.
//
// The rules, in order:
//   1. as few stages as possible (every hop costs a round trip per token);
//   2. among plans of that many stages, the one with the smallest estimated time per token: each
//      stage streams its weights once per decoding step, so a stage's time is its bytes over its
//      node's rate, and the plan's is their sum;
//   3. stages are ordered fastest first, and each fills its node's capacity before the next
//      begins (the fastest memory holds the most), leaving at least one layer for each stage
//      after it; the first stage also holds the token embeddings, the last the output head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::broker {

// What a split needs to know of a model, in bytes.
struct split_model {
  std::vector<uint64_t> layer_bytes;  // each layer's weights, by layer index
  uint64_t input_bytes = 0;           // token embeddings (the first stage)
  uint64_t output_bytes = 0;          // output norm and head (the last stage; a tied head is the
                                      // embedding table again)
  uint64_t kv_bytes_per_layer = 0;    // one layer's KV cache for the context a stage serves
  uint64_t stage_overhead = 0;        // what every stage needs besides (activations, scratch)
};

// An online node that may hold a stage.
struct split_node {
  std::string name;
  uint64_t capacity = 0;  // bytes it offers for weights and cache (its memory_limit, or free)
  double rate = 0;        // measured weight-streaming rate, bytes per second (0: unknown)
};

struct split_stage {
  std::string node;
  int32_t first = 0, end = 0;  // layers [first, end)
  uint64_t bytes = 0;          // what it holds: weights, cache and overhead
};

struct split_plan {
  std::vector<split_stage> stages;  // in pipeline order; empty when refused
  double seconds_per_token = 0;     // the estimate the plan was chosen by
  uint64_t missing = 0;             // refused: bytes short of the least a split needs
  std::string error;                // refused: why, for a user
  bool ok() const { return !stages.empty(); }
};

// The plan for `m` over `nodes` with at most `max_stages` stages. A model that one node holds
// whole gets one stage. Ties (equal rates or estimates) are broken by node name, so the same
// inputs always give the same plan.
split_plan plan_split(const split_model& m, const std::vector<split_node>& nodes,
                      size_t max_stages = 8);

}  // namespace hearth::broker
