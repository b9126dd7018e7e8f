#include "broker/command-dispatch.h"

#include <spdlog/spdlog.h>

#include <map>
#include <optional>

#include "broker/node-listing.h"

namespace hearth::broker {
namespace {

template <class M>
std::optional<M> decode_or_log(std::string_view body, const std::string& peer) {
  auto m = wire::decode<M>(body);
  if (!m) {
    spdlog::warn("dropped a malformed message from peer {}: {}", peer, m.message());
    return std::nullopt;
  }
  return std::move(m.value());
}

}  // namespace

void command_dispatch::handle(const std::string& rid, const peer& who, wire::command cmd,
                              std::string_view body, node_entry* node) {
  using wire::command;
  switch (cmd) {
    case command::node_hello:
      if (auto m = decode_or_log<wire::node_hello>(body, peer_name(rid))) {
        const std::string name = m->name;
        attempts_.on_hello(rid, who, std::move(*m));
        // A stage's node that comes back (restarted: its stages are gone) is told them again.
        if (const node_entry* n = nodes_.find(name); n && n->routing_id == rid)
          pipelines_.on_hello(*n);
      } else {
        out_.send_error(rid, 0, wire::error_code::malformed, "malformed node_hello");
      }
      return;
    case command::submit:
      return client_request<wire::submit>(
          rid, who, body, [&](auto m, const peer& as) { clients_.submit(rid, as, std::move(m)); });
    case command::watch:
      return client_request<wire::watch>(
          rid, who, body, [&](auto m, const peer& as) { clients_.watch(rid, as, m); });
    case command::cancel:
      return client_request<wire::cancel>(
          rid, who, body, [&](auto m, const peer& as) { clients_.cancel(rid, as, m); });
    case command::list_jobs:
      return client_request<wire::list_jobs>(
          rid, who, body, [&](auto m, const peer& as) { history_.list_jobs(rid, as, m); });
    case command::get_job:
      return client_request<wire::get_job>(
          rid, who, body, [&](auto m, const peer& as) { history_.get_job(rid, as, m); });
    case command::forget_node:
      return client_request<wire::forget_node>(rid, who, body, [&](auto m, const peer&) {
        if (!storage_.refuse(out_, rid, m.request_id)) nodes_.forget(rid, m);
      });
    case command::release_node:
      return client_request<wire::release_node>(rid, who, body, [&](auto m, const peer&) {
        if (nodes_.release(rid, m)) jobs_.dispatch_later();
      });
    case command::prune_jobs:
      return client_request<wire::prune_jobs>(rid, who, body,
                                              [&](auto m, const peer&) { history_.prune(rid, m); });
    case command::list_nodes:
      return client_request<wire::list_nodes>(
          rid, who, body, [&](auto m, const peer&) { list_nodes(out_, rid, m, nodes_); });
    case command::list_models:
      return client_request<wire::list_models>(rid, who, body, [&](auto m, const peer&) {
        std::map<std::string, uint32_t> queued;
        for (const auto& [model, q] : jobs_.queues()) queued[model] = uint32_t(q.size());
        list_models(out_, rid, m, nodes_, queued, placement_.transfers().listing(), pipelines_);
      });
    case command::pull_model:
      return client_request<wire::pull_model>(
          rid, who, body, [&](auto m, const peer&) { placement_.pull(rid, m); });
    case command::place_model:
      return client_request<wire::place_model>(rid, who, body, [&](auto m, const peer&) {
        if (!m.split.empty()) return pipelines_.place(rid, m);
        placement_.place(rid, m);
      });
    case command::evict_model:
      return client_request<wire::evict_model>(
          rid, who, body, [&](auto m, const peer&) { placement_.evict(rid, m); });
    case command::whoami:
      return client_request<wire::whoami>(
          rid, who, body, [&](auto m, const peer& as) { api_keys_.whoami(rid, as, m); });
    case command::create_api_key:
      return client_request<wire::create_api_key>(
          rid, who, body, [&](auto m, const peer&) { api_keys_.create(rid, m); });
    case command::list_api_keys:
      return client_request<wire::list_api_keys>(
          rid, who, body, [&](auto m, const peer&) { api_keys_.list(rid, m); });
    case command::revoke_api_key:
      return client_request<wire::revoke_api_key>(
          rid, who, body, [&](auto m, const peer&) { api_keys_.revoke(rid, m); });
    case command::get_metrics:
      return client_request<wire::get_metrics>(rid, who, body, [&](auto m, const peer&) {
        report_.reply(
            out_, rid, m,
            {jobs_.queues(), jobs_.jobs(), nodes_, jobs_.unfinished_bytes(), store_.stats(),
             zap_ ? std::optional<size_t>(zap_->connections()) : std::nullopt,
             placement_.transfers().live_by_state()});
      });
    default:
      if (wire::command_from_node(cmd)) break;
      spdlog::warn("dropped a {} from peer {}: not a command the broker accepts",
                   wire::command_name(cmd), peer_name(rid));
      return;
  }

  // Node commands from here on: only from a node that said hello on this connection.
  if (!node) {
    out_.send_error(rid, 0, wire::error_code::unknown_node,
                    "this broker does not know you; say hello again");
    return;
  }
  node_message(*node, cmd, body);
}

void command_dispatch::node_message(node_entry& node, wire::command cmd, std::string_view body) {
  using wire::command;
  switch (cmd) {
    case command::heartbeat:
      return;
    case command::node_pull:
      if (auto m = decode_or_log<wire::node_pull>(body, node.name)) {
        nodes_.pull(node, *m);
        jobs_.dispatch_later();
      }
      return;
    case command::node_status:
      if (auto m = decode_or_log<wire::node_status>(body, node.name)) {
        if (nodes_.status(node, std::move(*m))) jobs_.dispatch_later();
      }
      return;
    case command::job_started:
      if (auto m = decode_or_log<wire::job_started>(body, node.name))
        attempts_.on_started(node, *m);
      return;
    case command::job_tokens:
      if (auto m = decode_or_log<wire::job_tokens>(body, node.name)) {
        attempts_.on_tokens(node, *m, body);
      }
      return;
    case command::job_final:
      if (auto m = decode_or_log<wire::job_final>(body, node.name)) attempts_.on_final(node, *m);
      return;
    case command::job_handback:
      if (auto m = decode_or_log<wire::job_handback>(body, node.name)) {
        attempts_.on_handback(node, *m);
      }
      return;
    case command::transfer_status:
      if (auto m = decode_or_log<wire::transfer_status>(body, node.name)) {
        placement_.on_status(node, *m);
      }
      return;
    case command::node_bye:
      spdlog::info("node {} said goodbye", node.name);
      attempts_.node_lost(node, "node " + node.name + " shut down");
      return;
    default:
      return;
  }
}

template <class M, class F>
void command_dispatch::client_request(const std::string& rid, const peer& who,
                                      std::string_view body, F&& handle_request) {
  auto m = wire::decode<M>(body);
  if (!m) {
    spdlog::warn("dropped a malformed message from peer {}: {}", peer_name(rid), m.message());
    // The client hears why, under its request id when that much of the body can be read.
    out_.send_error(rid, wire::peek_request_id(body).value_or(0), wire::error_code::malformed,
                    m.message());
    return;
  }
  out_.note_request(rid, m->request_id);
  // Resolved once, here: every handler applies its owner rules to the identity it is given.
  if constexpr (requires { m->api_key; }) {
    if (!m->api_key.empty()) {
      const auto as = api_keys_.resolve(rid, m->request_id, who, m->api_key);
      if (!as) return;
      return handle_request(std::move(m.value()), *as);
    }
  }
  handle_request(std::move(m.value()), who);
}

}  // namespace hearth::broker
