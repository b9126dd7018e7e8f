// Models split across nodes, the broker's side (issue 55, schema/PROTOCOL.md section 17): the
// pipelines, which node holds which layers of which model, and the stage_assign each stage's node
// gets. A split model's jobs go to its last stage's node (job_table::dispatch), which runs the
// step round the ring of stages; the broker never sees the hidden states.
//
// Its own class so that "who holds which layers" is decided in one place: placement asks for a
// split (place_model with `split`), dispatch asks where a model's jobs go, the listing shows the
// stages, and a stage's node coming back is told its stage again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "broker/config.h"
#include "broker/node-registry.h"
#include "broker/turn-output.h"
#include "schema/messages.h"

namespace hearth::broker {

struct pipeline {
  uint64_t id = 0;
  uint32_t version = 0;
  std::string model;
  std::string hidden_type = "f32";
  std::vector<wire::pipeline_stage> stages;  // in pipeline order; the last runs the jobs
  // Planned by the broker (plan_for), not placed by an admin: it is planned again when the nodes
  // online allow fewer stages, or one node can hold the model whole.
  bool planned = false;
  net::steady::time_point replan_checked;  // when a plan of fewer stages was last looked for
  const std::string& driver() const { return stages.back().node; }
  // "pipeline 3 (version 2): n1 layers 0-7, n2 7-15, n3 15-22": what a job's history records.
  std::string describe() const;
};

// Layers [first, end) for each of `capacity.size()` stages of a model whose layers weigh
// `layer_bytes`: each stage's share of the layer bytes in proportion to its capacity, cut at the
// nearest layer boundary, every stage at least one layer. Empty when there are more stages than
// layers.
std::vector<std::pair<int32_t, int32_t>> split_layers(const std::vector<uint64_t>& layer_bytes,
                                                      const std::vector<uint64_t>& capacity);

class pipeline_table {
 public:
  pipeline_table(const broker_config& cfg, node_registry& nodes, turn_output& out)
      : cfg_(cfg), nodes_(nodes), out_(out) {}

  // place_model with `split` (admin): the model over those online nodes, in that order; each must
  // serve it and advertise its layout and a stage socket. Replies ok or an error naming what is
  // wrong. A model split before is split again (its old stages released).
  void place(const std::string& rid, const wire::place_model& m);

  // The pipeline a model's jobs run on, or nullptr.
  const pipeline* of(const std::string& model) const;

  // Dispatch of a queued job for `model` that no online node can hold whole: a pipeline planned
  // over the nodes that serve it (node-match.h model_split_plan), assigned, and returned; nullptr
  // when a node can hold it (it is only busy) or no split fits (waiting_reason says why).
  const pipeline* plan_for(const std::string& model);

  // What repair() changed.
  struct repairs {
    std::vector<std::string> moved;  // models whose stages moved: same pipeline, a new version
    // Models whose pipeline is gone, and why: their running jobs are queued again, and their
    // next dispatch plans them afresh (plan_for) or gives them to a node that holds them whole.
    std::vector<std::pair<std::string, std::string>> dissolved;
  };
  // Called before each dispatch, with whether jobs of a model are running.
  // Failover: each stage whose node is offline or quarantined moves to a spare node (online,
  // serving the same file, holding stages, not in the pipeline, with room for the stage: the
  // one offering the most), and the pipeline is assigned again at a new version; the last stage
  // then replays its sequences on the new stages (node/pipeline-link.h).
  // Re-planning: a pipeline with a stage no spare can take is dissolved (an admin's split too:
  // its jobs would wait for a node that may never come back, while the nodes online may hold
  // the model another way). A pipeline the broker planned is dissolved, once no job runs on it,
  // when one node can now hold the model whole or the nodes online hold it in fewer stages.
  repairs repair(const std::function<bool(const std::string& model)>& busy);

  // A node said hello (again, perhaps after a restart that lost its stages): every pipeline with
  // a stage on it is assigned again, at a new version, so that the stages agree on the neighbours'
  // addresses and none keeps a step of the old one.
  void on_hello(const node_entry& n);

  // The stages for models_reply (endpoints left out).
  std::vector<wire::pipeline_stage> listed_stages(const std::string& model) const;

 private:
  void assign_all(pipeline& p);
  // Why a pipeline the broker planned would be better planned again now ("" when not): one
  // node holds the model whole, or the nodes online hold it in fewer stages.
  std::string replan_reason(pipeline& p, net::steady::time_point now);
  // Tells every online stage of `p` to let its layers go.
  void release(const pipeline& p);
  // What node `n` needs to hold stage `s` of pipeline `p`, by what it says of the model.
  static uint64_t stage_need(const pipeline& p, size_t s, const wire::model_layout& l);

  const broker_config& cfg_;
  node_registry& nodes_;
  turn_output& out_;
  std::map<std::string, pipeline> by_model_;
  // A model no split fitted is planned again at most once a second (planning weighs every
  // subset of up to 16 nodes).
  std::map<std::string, net::steady::time_point> refused_at_;
  // Ids from the broker's start time (milliseconds, times 1000): pipelines live in memory only, and
  // a node may still hold a stage of a pipeline a restarted broker made, which a new one must not
  // reuse.
  uint64_t next_id_ = uint64_t(net::wall_ms()) * 1000;
};

}  // namespace hearth::broker
