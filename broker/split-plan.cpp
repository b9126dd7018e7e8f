#include "broker/split-plan.h"

#include <algorithm>
#include <limits>

#include "common/format-bytes.h"

namespace hearth::broker {
namespace {

// A node whose rate is not known yet streams at this rate in the estimate (1 GB/s: a modest
// machine's memory).
constexpr double k_unknown_rate = 1e9;

// More nodes than this: only those of the largest capacity are considered (the number of
// combinations grows as n choose k; a homelab has a handful).
constexpr size_t k_max_candidates = 16;

uint64_t sat_add(uint64_t a, uint64_t b) {
  return a + b < a ? UINT64_MAX : a + b;
}

// The stages of `m` on the nodes `order` (the pipeline's order), each filled before the next
// begins; empty when they cannot hold it.
std::vector<split_stage> fill(const split_model& m, const std::vector<const split_node*>& order) {
  const int32_t n_layer = int32_t(m.layer_bytes.size());
  const size_t k = order.size();
  std::vector<split_stage> out;
  int32_t at = 0;
  for (size_t s = 0; s < k; ++s) {
    const bool last = s + 1 == k;
    uint64_t used =
        sat_add(sat_add(m.stage_overhead, s == 0 ? m.input_bytes : 0), last ? m.output_bytes : 0);
    const uint64_t cap = order[s]->capacity;
    if (used > cap) return {};
    // Every stage after this one needs at least one layer.
    const int32_t limit = n_layer - int32_t(k - 1 - s);
    int32_t end = at;
    while (end < limit) {
      const uint64_t more =
          sat_add(used, sat_add(m.layer_bytes[size_t(end)], m.kv_bytes_per_layer));
      if (more > cap) break;
      used = more;
      ++end;
    }
    if (end == at || (last && end < n_layer)) return {};
    out.push_back({order[s]->name, at, end, used});
    at = end;
  }
  return out;
}

double seconds_per_token(const std::vector<split_stage>& stages,
                         const std::vector<const split_node*>& order) {
  double t = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const double rate = order[s]->rate > 0 ? order[s]->rate : k_unknown_rate;
    t += double(stages[s].bytes) / rate;
  }
  return t;
}

// Calls visit(indices) for every increasing k-subset of [0, n).
template <class Visit>
void each_subset(size_t n, size_t k, const Visit& visit) {
  std::vector<size_t> idx(k);
  for (size_t i = 0; i < k; ++i) idx[i] = i;
  while (true) {
    visit(idx);
    size_t i = k;
    while (i > 0 && idx[i - 1] == n - k + i - 1) --i;
    if (i == 0) return;
    ++idx[i - 1];
    for (size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
  }
}

}  // namespace

split_plan plan_split(const split_model& m, const std::vector<split_node>& nodes,
                      size_t max_stages) {
  split_plan plan;
  const size_t n_layer = m.layer_bytes.size();
  if (n_layer == 0) {
    plan.error = "the model has no layers to split";
    return plan;
  }
  // The candidates: nodes that offer memory, the largest first, at most k_max_candidates of
  // them; then fastest first (the pipeline's order), ties by name.
  std::vector<const split_node*> cand;
  for (const split_node& n : nodes) {
    if (n.capacity > 0) cand.push_back(&n);
  }
  std::sort(cand.begin(), cand.end(), [](const split_node* a, const split_node* b) {
    return a->capacity != b->capacity ? a->capacity > b->capacity : a->name < b->name;
  });
  if (cand.size() > k_max_candidates) cand.resize(k_max_candidates);
  std::sort(cand.begin(), cand.end(), [](const split_node* a, const split_node* b) {
    const double ra = a->rate > 0 ? a->rate : k_unknown_rate;
    const double rb = b->rate > 0 ? b->rate : k_unknown_rate;
    return ra != rb ? ra > rb : a->name < b->name;
  });

  const size_t k_max = std::min({cand.size(), max_stages, n_layer});
  for (size_t k = 1; k <= k_max; ++k) {
    double best = std::numeric_limits<double>::infinity();
    each_subset(cand.size(), k, [&](const std::vector<size_t>& idx) {
      std::vector<const split_node*> order;
      for (size_t i : idx) order.push_back(cand[i]);
      auto stages = fill(m, order);
      if (stages.empty()) return;
      const double t = seconds_per_token(stages, order);
      if (t < best) {  // strictly: the first of equal estimates (by the order above) stays
        best = t;
        plan.stages = std::move(stages);
        plan.seconds_per_token = t;
      }
    });
    if (plan.ok()) return plan;
  }

  // Refused: what the fewest stages that could hold it need against what the largest nodes
  // offer.
  const size_t k = std::max<size_t>(k_max, 1);
  uint64_t need = sat_add(m.input_bytes, m.output_bytes);
  for (uint64_t b : m.layer_bytes) need = sat_add(need, sat_add(b, m.kv_bytes_per_layer));
  need = sat_add(need, m.stage_overhead * k);
  std::vector<const split_node*> largest = cand;
  std::sort(largest.begin(), largest.end(),
            [](const split_node* a, const split_node* b) { return a->capacity > b->capacity; });
  uint64_t offered = 0;
  for (size_t i = 0; i < std::min(k, largest.size()); ++i) {
    offered = sat_add(offered, largest[i]->capacity);
  }
  if (need > offered) {
    plan.missing = need - offered;
    plan.error = "the model needs " + format_bytes(need) + " across " + std::to_string(k) +
                 (k == 1 ? " node" : " nodes") + " but " +
                 (cand.empty() ? std::string("no online node offers any memory")
                               : "the online nodes offer " + format_bytes(offered)) +
                 ": " + format_bytes(plan.missing) + " missing";
  } else {
    // Enough in total, but whole layers do not pack into what each node has.
    const uint64_t largest_layer = *std::max_element(m.layer_bytes.begin(), m.layer_bytes.end());
    plan.missing = sat_add(largest_layer, m.kv_bytes_per_layer);
    plan.error = "the model's layers (up to " + format_bytes(plan.missing) +
                 " each) do not pack into the free memory of " + std::to_string(k) +
                 (k == 1 ? " node" : " nodes") + " (" + format_bytes(offered) + " in all): about " +
                 format_bytes(plan.missing) + " more on one of them";
  }
  return plan;
}

}  // namespace hearth::broker
