#include "schema/messages.h"

#include <array>

namespace hearth::wire {

std::string_view command_name(command c) {
  switch (c) {
    case command::heartbeat:
      return "heartbeat";
    case command::error:
      return "error";
    case command::node_hello:
      return "node_hello";
    case command::node_pull:
      return "node_pull";
    case command::node_status:
      return "node_status";
    case command::job_started:
      return "job_started";
    case command::job_tokens:
      return "job_tokens";
    case command::job_final:
      return "job_final";
    case command::job_handback:
      return "job_handback";
    case command::node_bye:
      return "node_bye";
    case command::node_welcome:
      return "node_welcome";
    case command::job_assign:
      return "job_assign";
    case command::job_cancel:
      return "job_cancel";
    case command::job_resume:
      return "job_resume";
    case command::submit:
      return "submit";
    case command::watch:
      return "watch";
    case command::cancel:
      return "cancel";
    case command::list_jobs:
      return "list_jobs";
    case command::get_job:
      return "get_job";
    case command::list_nodes:
      return "list_nodes";
    case command::list_models:
      return "list_models";
    case command::forget_node:
      return "forget_node";
    case command::prune_jobs:
      return "prune_jobs";
    case command::whoami:
      return "whoami";
    case command::create_api_key:
      return "create_api_key";
    case command::list_api_keys:
      return "list_api_keys";
    case command::revoke_api_key:
      return "revoke_api_key";
    case command::get_metrics:
      return "get_metrics";
    case command::release_node:
      return "release_node";
    case command::accepted:
      return "accepted";
    case command::job_queued:
      return "job_queued";
    case command::job_running:
      return "job_running";
    case command::job_restarted:
      return "job_restarted";
    case command::job_done:
      return "job_done";
    case command::jobs_reply:
      return "jobs_reply";
    case command::job_reply:
      return "job_reply";
    case command::nodes_reply:
      return "nodes_reply";
    case command::models_reply:
      return "models_reply";
    case command::ok:
      return "ok";
    case command::pruned:
      return "pruned";
    case command::identity:
      return "identity";
    case command::api_key_created:
      return "api_key_created";
    case command::api_keys_reply:
      return "api_keys_reply";
    case command::metrics_reply:
      return "metrics_reply";
    case command::transfer_status:
      return "transfer_status";
    case command::model_fetch:
      return "model_fetch";
    case command::transfer_allow:
      return "transfer_allow";
    case command::model_evict:
      return "model_evict";
    case command::pull_model:
      return "pull_model";
    case command::place_model:
      return "place_model";
    case command::evict_model:
      return "evict_model";
    case command::transfers_started:
      return "transfers_started";
    case command::blob_request:
      return "blob_request";
    case command::blob_chunk:
      return "blob_chunk";
    case command::stage_assign:
      return "stage_assign";
    case command::stage_release:
      return "stage_release";
    case command::stage_batch:
      return "stage_batch";
  }
  return "unknown";
}

std::optional<command> command_from_byte(uint8_t b) {
  switch (b) {
    case uint8_t(command::heartbeat):
    case uint8_t(command::error):
    case uint8_t(command::node_hello):
    case uint8_t(command::node_pull):
    case uint8_t(command::node_status):
    case uint8_t(command::job_started):
    case uint8_t(command::job_tokens):
    case uint8_t(command::job_final):
    case uint8_t(command::job_handback):
    case uint8_t(command::node_bye):
    case uint8_t(command::node_welcome):
    case uint8_t(command::job_assign):
    case uint8_t(command::job_cancel):
    case uint8_t(command::job_resume):
    case uint8_t(command::submit):
    case uint8_t(command::watch):
    case uint8_t(command::cancel):
    case uint8_t(command::list_jobs):
    case uint8_t(command::get_job):
    case uint8_t(command::list_nodes):
    case uint8_t(command::list_models):
    case uint8_t(command::forget_node):
    case uint8_t(command::prune_jobs):
    case uint8_t(command::whoami):
    case uint8_t(command::create_api_key):
    case uint8_t(command::list_api_keys):
    case uint8_t(command::revoke_api_key):
    case uint8_t(command::get_metrics):
    case uint8_t(command::release_node):
    case uint8_t(command::accepted):
    case uint8_t(command::job_queued):
    case uint8_t(command::job_running):
    case uint8_t(command::job_restarted):
    case uint8_t(command::job_done):
    case uint8_t(command::jobs_reply):
    case uint8_t(command::job_reply):
    case uint8_t(command::nodes_reply):
    case uint8_t(command::models_reply):
    case uint8_t(command::ok):
    case uint8_t(command::pruned):
    case uint8_t(command::identity):
    case uint8_t(command::api_key_created):
    case uint8_t(command::api_keys_reply):
    case uint8_t(command::metrics_reply):
    case uint8_t(command::transfer_status):
    case uint8_t(command::model_fetch):
    case uint8_t(command::transfer_allow):
    case uint8_t(command::model_evict):
    case uint8_t(command::pull_model):
    case uint8_t(command::place_model):
    case uint8_t(command::evict_model):
    case uint8_t(command::transfers_started):
    case uint8_t(command::blob_request):
    case uint8_t(command::blob_chunk):
    case uint8_t(command::stage_assign):
    case uint8_t(command::stage_release):
    case uint8_t(command::stage_batch):
      return command(b);
  }
  return std::nullopt;
}

namespace {
constexpr std::array<std::string_view, 5> job_state_names = {"queued", "running", "completed",
                                                             "failed", "cancelled"};
}  // namespace

std::string_view job_state_name(job_state v) {
  const size_t i = size_t(v);
  return i < job_state_names.size() ? job_state_names[i] : "unknown";
}

std::optional<job_state> job_state_from_name(std::string_view name) {
  for (size_t i = 0; i < job_state_names.size(); ++i) {
    if (job_state_names[i] == name) return job_state(i);
  }
  return std::nullopt;
}

namespace {
constexpr std::array<std::string_view, 14> error_code_names = {
    "malformed",      "version_mismatch", "unknown_node",        "name_taken",      "unknown_model",
    "invalid_params", "not_found",        "queue_full",          "not_cancellable", "internal",
    "unauthorized",   "limit_reached",    "storage_unavailable", "no_chat_template"};
// A code appended to the enum without its name here would go on the wire as "unknown".
static_assert(error_code_names.size() == size_t(error_code::no_chat_template) + 1);
}  // namespace

std::string_view error_code_name(error_code v) {
  const size_t i = size_t(v);
  return i < error_code_names.size() ? error_code_names[i] : "unknown";
}

std::optional<error_code> error_code_from_name(std::string_view name) {
  for (size_t i = 0; i < error_code_names.size(); ++i) {
    if (error_code_names[i] == name) return error_code(i);
  }
  return std::nullopt;
}

}  // namespace hearth::wire
