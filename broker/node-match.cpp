// Which nodes can take a model's jobs (node-match.h).
#include "broker/node-match.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "broker/model-holders.h"
#include "common/format-ago.h"

namespace hearth::broker {

node_entry* best_node_for(node_map& nodes, const std::string& model, net::steady::time_point now,
                          std::chrono::milliseconds quarantine_window, uint32_t slots_needed) {
  const auto recent = now - quarantine_window;
  // What a node says about itself (a model "loaded", a GPU, its threads, its slots) costs nothing
  // to claim, so what it did decides: a node that lost attempts within the quarantine window
  // ranks below every node that lost fewer; then a node not measured yet that runs nothing gets
  // one attempt, to be measured; then the higher measured rate (tokens per second of its
  // completed attempts) wins. The claims only break ties among nodes not measured, then the free
  // credit (its slots after the clamp, less what it runs). A liar thus wins one attempt at a time
  // while an honest node is free, ranks by what it delivers once it has delivered, and is
  // quarantined once it has lost quarantine_after attempts.
  auto rank = [&](const node_entry& e) {
    const uint32_t losses = e.losses_since(recent);
    const bool clean = losses == 0;
    const bool trial = e.completed == 0 && e.running.empty();
    const bool claims = clean && e.completed == 0;
    return std::tuple(-int64_t(losses), trial, e.measured_rate, claims && e.has_loaded(model),
                      claims ? e.speed_rank() : 0, e.free_credit());
  };
  node_entry* pick = nullptr;
  for (auto& [name, n] : nodes) {
    if (!n.online || n.free_credit() == 0 || n.quarantined(now) || !n.can_hold(model) ||
        n.slots < slots_needed)
      continue;
    if (!pick || rank(n) > rank(*pick)) pick = &n;
  }
  return pick;
}

bool healthy_node_serves(const node_map& nodes, const std::string& model,
                         const std::string& except) {
  const auto now = net::steady::now();
  for (const auto& [name, n] : nodes) {
    if (name != except && n.online && !n.quarantined(now) && n.serves(model)) return true;
  }
  return false;
}

uint32_t most_slots_serving(const node_map& nodes, const std::string& model) {
  uint32_t most = 0;
  for (const auto& [name, n] : nodes) {
    if (n.online && n.serves(model)) most = std::max(most, n.slots);
  }
  return most;
}

bool healthy_node_holds(const node_map& nodes, const std::string& model) {
  const auto now = net::steady::now();
  for (const auto& [name, n] : nodes) {
    if (n.online && !n.quarantined(now) && n.can_hold(model)) return true;
  }
  return false;
}

split_plan model_split_plan(const node_map& nodes, const std::string& model) {
  const auto now = net::steady::now();
  split_model m;
  std::vector<split_node> cand;
  for (const auto& [name, n] : nodes) {
    if (!n.online || n.quarantined(now) || n.stage_port == 0) continue;
    const wire::model_info* mi = model_advertised(n, model);
    if (!mi || mi->layout.layer_bytes.empty()) continue;
    const wire::model_layout& l = mi->layout;
    if (m.layer_bytes.empty()) {
      m.layer_bytes = l.layer_bytes;
      m.input_bytes = l.input_bytes;
    } else if (m.layer_bytes != l.layer_bytes) {
      continue;  // another file under the same name: not a stage of this one
    }
    // The most any candidate needs for what every stage holds, its cache and its scratch.
    m.output_bytes = std::max(m.output_bytes, l.output_bytes + l.logits_bytes);
    m.kv_bytes_per_layer = std::max(m.kv_bytes_per_layer, l.kv_bytes_per_layer);
    m.stage_overhead = std::max(m.stage_overhead, l.shared_bytes + l.scratch_bytes);
    cand.push_back({name, n.capacity(), 0});
  }
  if (cand.empty()) {
    split_plan refused;
    refused.error = "no online node that serves model '" + model + "' can hold a stage of it";
    return refused;
  }
  return plan_split(m, cand);
}

std::string waiting_reason(const node_map& nodes, const std::string& model, uint32_t slots_needed) {
  if (healthy_node_serves(nodes, model, "") && !healthy_node_holds(nodes, model)) {
    // Served, but too large for any one node: it runs split when a plan fits.
    const split_plan plan = model_split_plan(nodes, model);
    if (plan.ok()) return "";
    return "no online node can hold model '" + model + "' alone, and split over the nodes " +
           "that serve it: " + plan.error + "; waiting";
  }
  if (healthy_node_serves(nodes, model, "")) {
    const uint32_t most = most_slots_serving(nodes, model);
    if (most >= slots_needed) return "";
    return "the online nodes that serve model '" + model + "' have at most " +
           std::to_string(most) + " slots; this job's " + std::to_string(slots_needed) +
           " choices need as many; waiting";
  }
  const node_entry* last = nullptr;  // the offline node that served it, seen last
  bool quarantined = false;
  const auto now = net::steady::now();
  for (const auto& [name, n] : nodes) {
    if (!n.serves(model)) continue;
    if (n.online && n.quarantined(now)) quarantined = true;
    if (!n.online && (!last || n.last_seen_ms > last->last_seen_ms)) last = &n;
  }
  if (quarantined) {
    return "every online node that serves model '" + model +
           "' is quarantined after losing attempts; waiting";
  }
  if (last) {
    return "no online node serves model '" + model + "' (last seen: node " + last->name + ", " +
           format_ago(last->last_seen_ms, net::wall_ms()) + "); waiting";
  }
  return "no node has offered model '" + model + "' yet; waiting";
}

bool chat_unformattable(const node_map& nodes, const std::string& model) {
  // Only online nodes' files are known; with none online the job waits as any other.
  bool served = false, formattable = false;
  for (const auto& [name, n] : nodes) {
    if (!n.online) continue;
    for (const auto& mi : n.models) {
      if (mi.name != model) continue;
      served = true;
      formattable = formattable || !mi.chat_template.empty();
    }
  }
  return served && !formattable;
}

}  // namespace hearth::broker
