#include "broker/pipelines.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>

#include "broker/model-holders.h"
#include "broker/node-match.h"
#include "common/format-bytes.h"

namespace hearth::broker {
namespace {

// Stage [first, end) on node `n`, as its neighbours reach it.
wire::pipeline_stage stage_on(const node_entry& n, int32_t first, int32_t end) {
  return {n.name, first, end, stage_endpoint(n), n.peer_key()};
}

}  // namespace

std::vector<std::pair<int32_t, int32_t>> split_layers(const std::vector<uint64_t>& layer_bytes,
                                                      const std::vector<uint64_t>& capacity) {
  const size_t n_layer = layer_bytes.size(), n_stage = capacity.size();
  if (n_stage == 0 || n_stage > n_layer) return {};
  const double total_cap = std::accumulate(capacity.begin(), capacity.end(), 0.0);
  const double total_bytes = std::accumulate(layer_bytes.begin(), layer_bytes.end(), 0.0);
  std::vector<std::pair<int32_t, int32_t>> out;
  size_t at = 0;
  double cap_before = 0, bytes_before = 0;
  for (size_t s = 0; s < n_stage; ++s) {
    size_t end = n_layer;
    if (s + 1 < n_stage) {
      cap_before += double(capacity[s]);
      const double target = total_cap > 0 ? total_bytes * cap_before / total_cap
                                          : total_bytes * double(s + 1) / double(n_stage);
      // The boundary nearest the target, leaving a layer for each later stage.
      end = at + 1;
      double bytes = bytes_before + double(layer_bytes[at]);
      while (end < n_layer - (n_stage - s - 1) &&
             std::abs(bytes + double(layer_bytes[end]) - target) <= std::abs(bytes - target)) {
        bytes += double(layer_bytes[end]);
        ++end;
      }
      bytes_before = bytes;
    }
    out.emplace_back(int32_t(at), int32_t(end));
    at = end;
  }
  return out;
}

void pipeline_table::place(const std::string& rid, const wire::place_model& m) {
  auto refuse = [&](wire::error_code code, const std::string& why) {
    out_.send_error(rid, m.request_id, code, why);
  };
  if (m.name.empty()) return refuse(wire::error_code::invalid_params, "place_model needs a name");
  if (m.split.size() < 2) {
    return refuse(wire::error_code::invalid_params,
                  "a split needs at least two nodes (one node runs the model whole)");
  }
  if (m.split.size() > 16) {
    return refuse(wire::error_code::invalid_params, "a split has at most 16 stages");
  }
  std::vector<const node_entry*> nodes;
  const wire::model_layout* layout = nullptr;
  for (const std::string& name : m.split) {
    const node_entry* n = nodes_.find(name);
    if (!n || !n->online)
      return refuse(wire::error_code::invalid_params, "node '" + name + "' is not online");
    if (std::count(m.split.begin(), m.split.end(), name) > 1)
      return refuse(wire::error_code::invalid_params, "node '" + name + "' is named twice");
    if (n->stage_port == 0) {
      return refuse(wire::error_code::invalid_params,
                    "node '" + name + "' holds no pipeline stages (its stage_port is 0)");
    }
    const wire::model_info* mi = model_advertised(*n, m.name);
    if (!mi) {
      return refuse(wire::error_code::invalid_params,
                    "node '" + name + "' does not serve model '" + m.name +
                        "' (a stage loads its layers from its own copy)");
    }
    if (mi->layout.layer_bytes.empty()) {
      return refuse(wire::error_code::invalid_params,
                    "node '" + name + "' does not say what model '" + m.name +
                        "' weighs by layer (an older node, or a model it cannot split)");
    }
    if (layout && layout->layer_bytes != mi->layout.layer_bytes) {
      return refuse(wire::error_code::invalid_params,
                    "the nodes' copies of model '" + m.name + "' differ in their layers");
    }
    layout = &mi->layout;
    nodes.push_back(n);
  }
  std::vector<uint64_t> capacity;
  for (const node_entry* n : nodes) capacity.push_back(n->capacity());
  const auto ranges = split_layers(layout->layer_bytes, capacity);
  if (ranges.empty()) {
    return refuse(wire::error_code::invalid_params,
                  "model '" + m.name + "' has " + std::to_string(layout->layer_bytes.size()) +
                      " layers, fewer than the " + std::to_string(nodes.size()) +
                      " stages asked for");
  }
  pipeline p;
  if (auto old = by_model_.find(m.name); old != by_model_.end()) {
    release(old->second);
    by_model_.erase(old);
  }
  p.id = next_id_++;
  p.model = m.name;
  p.hidden_type = cfg_.pipeline_hidden_type;
  for (size_t i = 0; i < nodes.size(); ++i) {
    p.stages.push_back(stage_on(*nodes[i], ranges[i].first, ranges[i].second));
  }
  std::string plan;
  for (const auto& s : p.stages)
    plan += (plan.empty() ? "" : ", ") + s.node + " [" + std::to_string(s.first) + ", " +
            std::to_string(s.end) + ")";
  spdlog::info("model {} split over {} nodes as pipeline {}: {}", m.name, p.stages.size(), p.id,
               plan);
  assign_all(by_model_[m.name] = std::move(p));
  out_.send(rid, wire::ok{m.request_id});
}

void pipeline_table::assign_all(pipeline& p) {
  ++p.version;
  for (uint32_t i = 0; i < p.stages.size(); ++i) {
    const node_entry* n = nodes_.find(p.stages[i].node);
    if (!n || !n->online) continue;  // told when it says hello again
    out_.send(n->routing_id,
              wire::stage_assign{p.id, p.version, p.model, p.stages, i, p.hidden_type});
  }
}

const pipeline* pipeline_table::plan_for(const std::string& model) {
  if (of(model) || healthy_node_holds(nodes_.nodes(), model)) return of(model);
  const auto now = net::steady::now();
  if (auto it = refused_at_.find(model);
      it != refused_at_.end() && now - it->second < std::chrono::seconds(1)) {
    return nullptr;
  }
  const split_plan plan = model_split_plan(nodes_.nodes(), model);
  if (!plan.ok() || plan.stages.size() < 2) {
    if (refused_at_.size() > 4096) refused_at_.clear();
    refused_at_[model] = now;
    return nullptr;
  }
  refused_at_.erase(model);
  pipeline p;
  p.id = next_id_++;
  p.model = model;
  p.hidden_type = cfg_.pipeline_hidden_type;
  p.planned = true;
  p.replan_checked = now;
  std::string text;
  for (const auto& s : plan.stages) {
    p.stages.push_back(stage_on(*nodes_.find(s.node), s.first, s.end));
    text += (text.empty() ? "" : ", ") + s.node + " [" + std::to_string(s.first) + ", " +
            std::to_string(s.end) + ") " + format_bytes(s.bytes);
  }
  spdlog::info("model {}: no online node can hold it alone; split over {} nodes as pipeline {}: {}",
               model, p.stages.size(), p.id, text);
  pipeline& added = by_model_[model] = std::move(p);
  assign_all(added);
  return &added;
}

uint64_t pipeline_table::stage_need(const pipeline& p, size_t s, const wire::model_layout& l) {
  const auto& st = p.stages[s];
  uint64_t need = l.shared_bytes + l.scratch_bytes;
  for (int32_t il = st.first; il < st.end && size_t(il) < l.layer_bytes.size(); ++il)
    need += l.layer_bytes[size_t(il)] + l.kv_bytes_per_layer;
  if (s == 0) need += l.input_bytes;
  if (s + 1 == p.stages.size()) need += l.output_bytes + l.logits_bytes;
  return need;
}

std::string pipeline::describe() const {
  std::string s = "pipeline " + std::to_string(id) + " (version " + std::to_string(version) + "):";
  for (size_t i = 0; i < stages.size(); ++i) {
    s += (i ? ", " : " ") + stages[i].node + " layers " + std::to_string(stages[i].first) + "-" +
         std::to_string(stages[i].end);
  }
  return s;
}

pipeline_table::repairs pipeline_table::repair(
    const std::function<bool(const std::string& model)>& busy) {
  repairs out;
  const auto now = net::steady::now();
  for (auto it = by_model_.begin(); it != by_model_.end();) {
    const std::string& model = it->first;
    pipeline& p = it->second;
    bool moved = false;
    std::string stranded;  // a stage whose node is gone and that no spare can take
    for (size_t s = 0; s < p.stages.size(); ++s) {
      const node_entry* held = nodes_.find(p.stages[s].node);
      if (held && held->online && !held->quarantined(now)) continue;
      const node_entry* best = nullptr;
      for (const auto& [name, n] : nodes_.nodes()) {
        if (!n.online || n.quarantined(now) || n.stage_port == 0) continue;
        const bool in_pipeline = std::any_of(p.stages.begin(), p.stages.end(),
                                             [&](const auto& x) { return x.node == name; });
        if (in_pipeline) continue;
        const wire::model_info* mi = model_advertised(n, model);
        if (!mi || mi->layout.layer_bytes.empty()) continue;
        if (stage_need(p, s, mi->layout) > n.capacity()) continue;
        if (!best || n.capacity() > best->capacity()) best = &n;
      }
      if (!best) {
        stranded = "node " + p.stages[s].node + " (layers [" + std::to_string(p.stages[s].first) +
                   ", " + std::to_string(p.stages[s].end) + ")) is " +
                   (held && held->online ? "quarantined" : "offline") +
                   " and no spare node can take its layers";
        break;
      }
      spdlog::warn("pipeline {} (model {}): stage {} (layers [{}, {})) moves from node {} to {}",
                   p.id, model, s + 1, p.stages[s].first, p.stages[s].end, p.stages[s].node,
                   best->name);
      p.stages[s] = stage_on(*best, p.stages[s].first, p.stages[s].end);
      moved = true;
    }
    std::string why = stranded;
    if (why.empty() && p.planned && !busy(model)) why = replan_reason(p, now);
    if (!why.empty()) {
      spdlog::warn("pipeline {} (model {}) is dissolved: {}; the model is planned again", p.id,
                   model, why);
      release(p);
      out.dissolved.emplace_back(model, "pipeline " + std::to_string(p.id) + " of model '" + model +
                                            "' is planned again: " + why);
      it = by_model_.erase(it);
      continue;
    }
    if (moved) {
      assign_all(p);
      out.moved.push_back(model);
    }
    ++it;
  }
  return out;
}

std::string pipeline_table::replan_reason(pipeline& p, net::steady::time_point now) {
  for (const auto& [name, n] : nodes_.nodes()) {
    if (n.online && !n.quarantined(now) && n.can_hold(p.model))
      return "node " + name + " can hold it whole";
  }
  // Planning weighs every subset of the nodes: not more than once a second.
  if (now - p.replan_checked < std::chrono::seconds(1)) return "";
  p.replan_checked = now;
  const split_plan plan = model_split_plan(nodes_.nodes(), p.model);
  if (plan.ok() && plan.stages.size() < p.stages.size()) {
    return "the nodes online hold it in " + std::to_string(plan.stages.size()) + " stages, not " +
           std::to_string(p.stages.size());
  }
  return "";
}

void pipeline_table::release(const pipeline& p) {
  for (const auto& s : p.stages) {
    if (const node_entry* n = nodes_.find(s.node); n && n->online)
      out_.send(n->routing_id, wire::stage_release{p.id});
  }
}

const pipeline* pipeline_table::of(const std::string& model) const {
  auto it = by_model_.find(model);
  return it == by_model_.end() ? nullptr : &it->second;
}

void pipeline_table::on_hello(const node_entry& n) {
  for (auto& [model, p] : by_model_) {
    bool holds = false;
    for (auto& s : p.stages) {
      if (s.node != n.name) continue;
      holds = true;
      // Its address or port may have changed with the restart.
      s = stage_on(n, s.first, s.end);
    }
    if (holds) assign_all(p);
  }
}

std::vector<wire::pipeline_stage> pipeline_table::listed_stages(const std::string& model) const {
  std::vector<wire::pipeline_stage> out;
  if (const pipeline* p = of(model)) {
    for (const auto& s : p->stages) out.push_back({s.node, s.first, s.end, "", ""});
  }
  return out;
}

}  // namespace hearth::broker
