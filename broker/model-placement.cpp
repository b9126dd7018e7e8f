// Models flowing through the homelab, the broker's side (model-placement.h).
#include "broker/model-placement.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace hearth::broker {

std::string model_placement::refuse_target(const node_entry* n, const std::string& name,
                                           wire::error_code& code) const {
  code = wire::error_code::not_found;
  if (!n || !n->online) return "node " + name + " is not online";
  code = wire::error_code::invalid_params;
  if (n->store_capacity == 0) {
    return "node " + name + " keeps no model store (its store is full or off, or it is older)";
  }
  code = wire::error_code::limit_reached;
  if (transfers_.onto(name) >= cfg_.max_transfers_per_node) {
    return "node " + name + " has " + std::to_string(cfg_.max_transfers_per_node) +
           " transfers running (max_transfers_per_node); wait for one to end";
  }
  if (transfers_.live_count() >= cfg_.max_transfers) {
    return "the broker runs " + std::to_string(transfers_.live_count()) +
           " transfers (max_transfers); wait for one to end";
  }
  return "";
}

void model_placement::pull(const std::string& rid, const wire::pull_model& m) {
  auto refuse = [&](wire::error_code code, const std::string& why) {
    out_.send_error(rid, m.request_id, code, why);
  };
  if (m.source.empty())
    return refuse(wire::error_code::invalid_params, "pull_model needs a source");
  if (m.to.empty() == !m.all) {
    return refuse(wire::error_code::invalid_params, "pull_model needs either to (a node) or all");
  }
  if (m.source.starts_with("https://") && m.sha256.empty()) {
    return refuse(wire::error_code::invalid_params,
                  "an https:// source needs its sha256 (a file with no digest cannot be verified)");
  }
  std::vector<node_entry*> targets;
  wire::error_code code{};
  std::string why;
  if (!m.all) {
    node_entry* n = nodes_.find(m.to);
    if (why = refuse_target(n, m.to, code); !why.empty()) return refuse(code, why);
    targets.push_back(n);
  } else {
    for (auto& [name, n] : nodes_.nodes()) {
      if (!n.online || n.store_capacity == 0) continue;
      if (std::string w = refuse_target(&n, name, code); w.empty()) {
        targets.push_back(&n);
      } else {
        why = w;
      }
    }
    if (targets.empty()) {
      return refuse(why.empty() ? wire::error_code::not_found : code,
                    why.empty() ? "no online node keeps a model store" : why);
    }
  }
  // Until the node resolves the source, the source names the transfer.
  std::string model = m.name.empty() ? m.source : m.name;
  model.resize(std::min(model.size(), transfer_table::k_max_error_bytes));
  wire::transfers_started r{m.request_id, {}};
  for (node_entry* n : targets) {
    if (model_transfer* t = transfers_.running(model, n->name)) {
      r.transfers.push_back(t->info);
      continue;
    }
    model_transfer t;
    const uint64_t id = transfers_.next_id();
    t.info = {id, model, n->name, m.source, "starting", 0, 0, uint64_t(net::wall_ms()), ""};
    t.pull_source = m.source;
    t.pull_name = m.name;
    t.sha256 = m.sha256;
    t.sent = t.last_report = net::steady::now();
    out_.send(n->routing_id, wire::model_fetch{t.info.transfer_id, m.name, m.source, m.sha256});
    spdlog::info("transfer {}: pull {} onto node {}", t.info.transfer_id, m.source, n->name);
    r.transfers.push_back(t.info);
    transfers_.add(std::move(t));
  }
  out_.send(rid, r);
}

void model_placement::place(const std::string& rid, const wire::place_model& m) {
  auto refuse = [&](wire::error_code code, const std::string& why) {
    out_.send_error(rid, m.request_id, code, why);
  };
  if (m.name.empty()) return refuse(wire::error_code::invalid_params, "place_model needs a name");
  if (m.to.empty() == !m.all) {
    return refuse(wire::error_code::invalid_params, "place_model needs either to (a node) or all");
  }
  const node_map& nodes = nodes_.nodes();
  const std::string digest = listed_digest(nodes, m.name);
  const std::vector<std::string> holders = model_holders(nodes, m.name, digest);
  const wire::model_info* info = nullptr;
  for (const auto& h : holders) {
    const node_entry& n = nodes.at(h);
    const auto* mi = model_advertised(n, m.name);
    if (n.transfer_port > 0 && !mi->files.empty()) info = mi;
  }
  if (!info) {
    return refuse(wire::error_code::not_found,
                  "no online node holds model " + m.name +
                      (digest.empty() ? " with a known digest" : " and serves copies"));
  }
  const uint64_t size = model_bytes(*info);
  std::vector<node_entry*> targets;
  wire::error_code code{};
  if (!m.all) {
    node_entry* n = nodes_.find(m.to);
    if (n && std::find(holders.begin(), holders.end(), m.to) != holders.end()) {
      out_.send(rid, wire::transfers_started{m.request_id, {}});  // it has it already
      return;
    }
    if (model_transfer* t = transfers_.running(m.name, m.to)) {
      out_.send(rid, wire::transfers_started{m.request_id, {t->info}});
      return;
    }
    if (std::string why = refuse_target(n, m.to, code); !why.empty()) return refuse(code, why);
    if (n->store_capacity < size) {
      return refuse(wire::error_code::invalid_params,
                    "node " + m.to + "'s store can take " + std::to_string(n->store_capacity) +
                        " bytes; model " + m.name + " has " + std::to_string(size));
    }
    targets.push_back(n);
  } else {
    for (auto& [name, n] : nodes_.nodes()) {
      if (std::find(holders.begin(), holders.end(), name) != holders.end()) continue;
      if (transfers_.running(m.name, name) ||
          (n.store_capacity >= size && refuse_target(&n, name, code).empty())) {
        targets.push_back(&n);
      }
    }
  }
  wire::transfers_started r{m.request_id, {}};
  for (node_entry* n : targets) {
    if (model_transfer* t = transfers_.running(m.name, n->name)) {
      r.transfers.push_back(t->info);
    } else if (auto started = start_copy(m.name, digest, *n)) {
      r.transfers.push_back(*started);
    }
  }
  out_.send(rid, r);
}

std::optional<wire::transfer_info> model_placement::start_copy(const std::string& model,
                                                               const std::string& digest,
                                                               node_entry& target) {
  const node_map& nodes = nodes_.nodes();
  model_transfer t;
  t.copy = true;
  t.digest = digest;
  for (const auto& h : model_holders(nodes, model, digest)) {
    const auto* mi = model_advertised(nodes.at(h), model);
    if (h == target.name || nodes.at(h).transfer_port == 0 || mi->files.empty()) continue;
    t.files = mi->files;
    t.origin = mi->source;
    break;
  }
  if (t.files.empty()) return std::nullopt;
  const uint64_t id = transfers_.next_id();
  t.info = {id, model, target.name, "", "starting", 0, 0, uint64_t(net::wall_ms()), ""};
  for (const auto& f : t.files) t.info.bytes_total += f.size;
  if (!send_copy(t)) return std::nullopt;
  return transfers_.add(std::move(t)).info;
}

bool model_placement::send_copy(model_transfer& t) {
  const node_map& nodes = nodes_.nodes();
  const node_entry* target = nodes_.find(t.info.node);
  if (!target || !target->online) return false;
  // Holders serving the fewest copies first, so that copies spread over them.
  std::vector<std::string> peers;
  for (const auto& h : model_holders(nodes, t.info.model, t.digest)) {
    if (h != t.info.node && nodes.at(h).transfer_port > 0) peers.push_back(h);
  }
  if (peers.empty()) return false;
  t.peers.clear();
  std::stable_sort(peers.begin(), peers.end(), [&](const auto& a, const auto& b) {
    return transfers_.copies_from(a) < transfers_.copies_from(b);
  });
  t.peers = peers;
  wire::model_fetch f{
      t.info.transfer_id, t.info.model, "peer:" + peers.front(), "", t.files, {}, t.origin};
  for (const auto& h : peers) {
    const node_entry& n = nodes.at(h);
    f.peers.push_back({h, transfer_endpoint(n), n.transfer_key});
  }
  send_tickets(t);
  out_.send(target->routing_id, f);
  t.info.source = f.source;
  t.sent = t.last_report = net::steady::now();
  t.next_tickets = t.sent + k_ticket_renew;
  std::string from;
  for (const auto& h : peers) from += (from.empty() ? "" : ", ") + h;
  spdlog::info("transfer {}: copy {} onto node {} from {}", t.info.transfer_id, t.info.model,
               t.info.node, from);
  return true;
}

void model_placement::send_tickets(const model_transfer& t) {
  const node_entry* target = nodes_.find(t.info.node);
  if (!target) return;
  // The key the fetcher proves on the holder's socket.
  wire::transfer_allow a{t.info.transfer_id, t.info.node, target->peer_key(), {}, k_ticket_ttl_ms};
  for (const auto& f : t.files) a.digests.push_back(f.digest);
  for (const auto& h : t.peers) {
    const node_entry* n = nodes_.find(h);
    if (n && n->online) out_.send(n->routing_id, a);
  }
}

void model_placement::evict(const std::string& rid, const wire::evict_model& m) {
  const node_entry* n = nodes_.find(m.from);
  if (!n || !n->online) {
    out_.send_error(rid, m.request_id, wire::error_code::not_found,
                    "node " + m.from + " is not online");
  } else if (!model_advertised(*n, m.name)) {
    out_.send_error(rid, m.request_id, wire::error_code::not_found,
                    "node " + m.from + " does not hold model " + m.name);
  } else {
    out_.send(n->routing_id, wire::model_evict{m.name});
    spdlog::info("model {} evicted from node {} by an admin", m.name, m.from);
    out_.send(rid, wire::ok{m.request_id});
  }
}

void model_placement::on_status(const node_entry& node, wire::transfer_status m) {
  model_transfer* t = transfers_.report(node, m);
  if (!t) return;  // not this node's, or not failed
  if (t->copy && t->retries == 0) {
    // Once more, from the holders online now; the node resumes what it had.
    ++t->retries;
    spdlog::warn("transfer {} onto node {} failed ({}); trying again", m.transfer_id, node.name,
                 m.error);
    t->info.state = "starting";
    if (send_copy(*t)) return;
  }
  transfers_.finish(m.transfer_id, "failed", m.error.empty() ? "the node gave no reason" : m.error);
}

void model_placement::timers(net::steady::time_point now) {
  transfers_.expire(now, nodes_.nodes(), [&](model_transfer& t) {
    send_tickets(t);
    t.next_tickets = now + k_ticket_renew;
  });
}

std::string model_placement::place_for_job(const std::string& model) {
  if (std::string node = transfers_.copying(model); !node.empty()) return node;
  const node_map& nodes = nodes_.nodes();
  const std::string digest = listed_digest(nodes, model);
  uint64_t size = 0;
  for (const auto& h : model_holders(nodes, model, digest)) {
    const node_entry& n = nodes.at(h);
    if (n.transfer_port > 0) size = model_bytes(*model_advertised(n, model));
  }
  if (size == 0) return "";
  node_entry* best = nullptr;
  wire::error_code code{};
  for (auto& [name, n] : nodes_.nodes()) {
    if (model_advertised(n, model) || n.store_capacity < size || node_free_memory(n) < size)
      continue;
    if (!refuse_target(&n, name, code).empty()) continue;
    if (!best || node_free_memory(n) > node_free_memory(*best)) best = &n;
  }
  if (!best || !start_copy(model, digest, *best)) return "";
  spdlog::info("auto_place: a job waits for model {}; placing it on node {}", model, best->name);
  return best->name;
}

void model_placement::auto_place(const std::map<std::string, job_queue>& queues,
                                 const std::function<std::string(const std::string&)>& waiting,
                                 const std::function<void(uint64_t, const std::string&)>& note) {
  for (const auto& [model, queue] : queues) {
    if (queue.empty() || waiting(model).empty()) continue;
    const std::string node = place_for_job(model);
    model_transfer* t = node.empty() ? nullptr : transfers_.running(model, node);
    if (!t) continue;
    // Each waiting job hears it once (a bounded number per turn: the rest on the next tick).
    const std::string detail = "waiting for placement of " + model + " on " + node;
    size_t told = 0;
    for (const auto& [key, id] : queue) {
      if (told == k_jobs_told_per_tick) break;
      if (t->jobs_told.insert(id).second) {
        note(id, detail);
        ++told;
      }
    }
  }
}

}  // namespace hearth::broker
