// list_nodes and list_models (node-listing.h).
#include "broker/node-listing.h"

#include <algorithm>

#include "broker/reply-list.h"

namespace hearth::broker {

void list_nodes(turn_output& out, const std::string& rid, const wire::list_nodes& m,
                const node_registry& nodes) {
  wire::nodes_reply r;
  r.request_id = m.request_id;
  // Capped to fit one message: online nodes first, so offline records cannot crowd them out.
  reply_list list(r, &wire::nodes_reply::nodes);
  for (bool online : {true, false}) {
    for (const auto& [name, n] : nodes.nodes()) {
      if (n.online == online) list.offer(n.summary());
    }
  }
  r.total = list.total();
  r.truncated = list.truncated();
  out.send(rid, r);
}

void list_models(turn_output& out, const std::string& rid, const wire::list_models& m,
                 const node_registry& nodes, const std::map<std::string, uint32_t>& queued,
                 std::vector<wire::transfer_info> transfers, const pipeline_table& pipelines) {
  std::map<std::string, wire::model_summary> models;
  // Online nodes advertising each model with a digest, in the registry's order: the first one's
  // digest is the listed one, its holders those with the same (as listed_digest and model_holders
  // say, gathered in this one pass: thousands of nodes and models would make asking per model
  // quadratic).
  std::map<std::string, std::vector<std::pair<std::string, const std::string*>>> digests;
  for (const auto& [name, n] : nodes.nodes()) {
    for (const auto& mi : n.models) {
      auto& s = models[mi.name];
      if (s.name.empty()) {
        s.name = mi.name;
        s.architecture = mi.architecture;
        s.quantization = mi.quantization;
        s.size_bytes = mi.size_bytes;
        s.context_length = mi.context_length;
      }
      // A node that counted the parameters (an older one sends none) tells them.
      if (s.params_total == 0) {
        s.params_total = mi.params_total;
        s.params_active = mi.params_active;
      }
      if (n.online) {
        s.nodes.push_back(name);
        if (mi.loaded) s.loaded_on.push_back(name);
        if (!mi.digest.empty()) digests[mi.name].emplace_back(name, &mi.digest);
      }
    }
  }
  for (auto& [model, s] : models) s.stages = pipelines.listed_stages(model);
  for (const auto& [model, n_queued] : queued) {
    auto& s = models[model];
    s.name = model;
    s.queued = n_queued;
  }
  for (const auto& [model, advertised] : digests) {
    auto& s = models[model];
    s.digest = *advertised.front().second;
    for (const auto& [node, digest] : advertised) {
      if (*digest == s.digest) s.holders.push_back(node);
    }
  }
  wire::models_reply r;
  r.request_id = m.request_id;
  // Capped to fit one message: models an online node serves or a job waits for come first.
  reply_list list(r, &wire::models_reply::models);
  for (bool in_use : {true, false}) {
    for (const auto& [name, s] : models) {
      if ((!s.nodes.empty() || s.queued > 0) == in_use) list.offer(s);
    }
  }
  r.total = list.total();
  r.truncated = list.truncated();
  // Online nodes' skipped files, at most k_max_skipped_listed in all (a node sends at most 64).
  constexpr size_t k_max_skipped_listed = 256;
  size_t listed = 0;
  for (const auto& [name, n] : nodes.nodes()) {
    if (!n.online || n.skipped.empty() || listed == k_max_skipped_listed) continue;
    const size_t take = std::min(n.skipped.size(), k_max_skipped_listed - listed);
    r.skipped.push_back({name, {n.skipped.begin(), n.skipped.begin() + ptrdiff_t(take)}});
    listed += take;
  }
  // At most transfer_table::k_finished_kept: a transfer_info is small, so they fit beside the
  // capped lists.
  r.transfers = std::move(transfers);
  out.send(rid, r);
}

}  // namespace hearth::broker
