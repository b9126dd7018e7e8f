#include "gateway/model-catalog.h"

#include <algorithm>

namespace hearth::gateway {

model_catalog::model_catalog(gateway_services& s, std::chrono::milliseconds max_age)
    : services_(s), max_age_(max_age) {}

void model_catalog::get(reply_fn done) {
  const auto now = std::chrono::steady_clock::now();
  if (cached_ && now - fetched_ < max_age_) return done(*cached_);
  waiting_.push_back(std::move(done));
  if (waiting_.size() > 1) return;  // the list on its way answers this caller too
  // The gateway asks as itself: the list is the same for every caller.
  services_.broker().request<wire::models_reply>(
      wire::list_models{}, [self = shared_from_this()](link_result<wire::models_reply> r) {
        if (auto* m = std::get_if<wire::models_reply>(&r)) {
          self->cached_ = *m;
          self->fetched_ = std::chrono::steady_clock::now();
        }
        auto callers = std::move(self->waiting_);
        self->waiting_.clear();
        for (auto& c : callers) c(r);
      });
}

std::string model_names(const wire::models_reply& models) {
  constexpr size_t k_shown = 32;
  std::string names;
  for (size_t i = 0; i < models.models.size() && i < k_shown; ++i) {
    if (i) names += ", ";
    names += models.models[i].name;
  }
  const size_t total = std::max<size_t>(models.total, models.models.size());
  if (total > k_shown) names += " and " + std::to_string(total - k_shown) + " more";
  return names.empty() ? "none" : names;
}

std::optional<http_response> model_unavailable(const wire::models_reply& models,
                                               const std::string& model) {
  auto it = std::find_if(models.models.begin(), models.models.end(),
                         [&](const wire::model_summary& m) { return m.name == model; });
  if (it == models.models.end()) {
    // A list cut short does not say; the broker decides (unknown_model -> 404 too).
    if (models.truncated) return std::nullopt;
    return error_response(
        404,
        "model '" + model + "' is not served by any node; known models: " + model_names(models),
        "invalid_request_error", "model", "model_not_found");
  }
  if (it->nodes.empty()) {
    return error_response(
        503, "model '" + model + "' is known, but no node that serves it is online; retry later",
        "server_error", "model", "model_unavailable");
  }
  return std::nullopt;
}

ojson openai_model_json(const wire::model_summary& m) {
  ojson j;
  j["id"] = m.name;
  j["object"] = "model";
  j["created"] = 0;  // the broker does not record when a model first appeared
  j["owned_by"] = "hearth";
  j["nodes"] = m.nodes;
  j["loaded_on"] = m.loaded_on;
  j["context_length"] = m.context_length;
  j["architecture"] = m.architecture;
  j["quantization"] = m.quantization;
  j["size_bytes"] = m.size_bytes;
  j["queued"] = m.queued;
  return j;
}

}  // namespace hearth::gateway
