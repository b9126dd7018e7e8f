// The broker's list of models as the gateway's routes see it: fetched with list_models, kept
// for a second so that a burst of requests costs the broker one list, and shared by every
// request (the I/O thread only: no locks). Also the OpenAI model objects made from it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gateway/gateway.h"
#include "gateway/http.h"
#include "gateway/openai-json.h"

namespace hearth::gateway {

// Held by shared_ptr: a list_models on its way keeps it alive.
class model_catalog : public std::enable_shared_from_this<model_catalog> {
 public:
  using reply_fn = std::function<void(const link_result<wire::models_reply>&)>;

  explicit model_catalog(gateway_services& s,
                         std::chrono::milliseconds max_age = std::chrono::seconds(1));
  // The list, at most max_age old; `done` runs on the I/O thread (at once when cached).
  void get(reply_fn done);

 private:
  gateway_services& services_;
  std::chrono::milliseconds max_age_;
  std::optional<wire::models_reply> cached_;
  std::chrono::steady_clock::time_point fetched_;
  std::vector<reply_fn> waiting_;  // callers while a list_models is on its way
};

// Whether a job for `model` can be submitted now: nullopt when some online node serves it (or
// the list was cut short and does not say), else the error: 404 naming the known models when no
// node ever served it, 503 when none of those that did is online.
std::optional<http_response> model_unavailable(const wire::models_reply& models,
                                               const std::string& model);

// OpenAI's model object, with hearth's fields (nodes, loaded_on, context_length, architecture,
// quantization, size_bytes, queued).
ojson openai_model_json(const wire::model_summary& m);

// The names of the known models, "a, b, c" (the first 32, then how many more).
std::string model_names(const wire::models_reply& models);

}  // namespace hearth::gateway
