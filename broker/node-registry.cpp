// The node registry (node-registry.h): registration, credit, heartbeats and liveness, lost
// attempts (their quarantine: node-quarantine.cpp), the registry's records.
#include "broker/node-registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace hearth::broker {

node_entry* node_registry::by_routing_id(const std::string& rid) {
  auto it = node_by_rid_.find(rid);
  if (it == node_by_rid_.end()) return nullptr;
  return &nodes_.at(it->second);
}

void node_registry::store_node(const node_entry& n) {
  store_.node_upsert(n.summary());
}

node_entry* node_registry::hello(const std::string& rid, const peer& who, wire::node_hello& m) {
  if (!admission_.admit(rid, who, m, nodes_)) return nullptr;
  // A live node's new connection (admitted as the same machine and process) replaces its old.
  node_entry& n = nodes_[m.name];
  if (!n.routing_id.empty()) node_by_rid_.erase(n.routing_id);
  if (!who.key.empty()) n.key = who.key;
  n.name = m.name;
  n.routing_id = rid;
  n.hostname = m.hostname;
  n.engine = m.engine;
  n.instance = m.instance;
  n.address = who.address;
  n.transfer_port = m.transfer_port;
  n.transfer_key = m.transfer_key;
  n.stage_port = m.stage_port;
  n.store_capacity = m.store_capacity;
  if (m.slots > cfg_.max_node_slots && m.slots != n.declared_slots) {
    spdlog::warn("node {} declares {} slots; it gets at most {} (max_node_slots)", m.name, m.slots,
                 cfg_.max_node_slots);
  }
  n.declared_slots = m.slots;
  n.slots = std::min(m.slots, cfg_.max_node_slots);
  n.hardware = std::move(m.hardware);
  n.models = std::move(m.models);
  n.skipped = std::move(m.skipped);
  n.online = true;
  n.last_heard = net::steady::now();
  n.last_seen_ms = net::wall_ms();
  n.last_stored = n.last_heard;
  node_by_rid_[rid] = n.name;
  for (const auto& model : n.models) known_models_.insert(model.name);
  return &n;
}

void node_registry::welcome(node_entry& n, const std::vector<wire::job_resume>& resumes) {
  const std::string& rid = n.routing_id;
  n.credit = 0;  // the node grants credit with node_pull once welcomed
  store_node(n);
  out_.send(rid, wire::node_welcome{wire::protocol_version, cfg_.heartbeat_ms, cfg_.liveness});
  for (const auto& r : resumes) out_.send(rid, r);
  spdlog::info("node {} ({}, {} engine, {} slots, {} models) is online", n.name, n.hostname,
               n.engine, n.slots, n.models.size());
}

void node_registry::heard(node_entry& n) {
  n.missed_counted = 0;
  n.last_heard = net::steady::now();
  n.last_seen_ms = net::wall_ms();
}

void node_registry::pull(node_entry& n, const wire::node_pull& m) {
  // Credit and running attempts together stay within its slots, whatever it asks for.
  n.credit = uint32_t(std::min<uint64_t>(uint64_t(n.credit) + m.credit, n.free_slots()));
}

bool node_registry::status(node_entry& n, wire::node_status m) {
  if (const size_t bytes = wire::encode(m).size(); bytes > k_max_registration_bytes) {
    spdlog::warn("node {}: ignored a node_status of {} bytes (at most {})", n.name, bytes,
                 k_max_registration_bytes);
    return false;
  }
  n.models = std::move(m.models);
  n.skipped = std::move(m.skipped);
  // An older node sends no hardware (cpu_threads 0): the hello's stays.
  if (m.hardware.cpu_threads > 0) n.hardware = std::move(m.hardware);
  if (m.store_capacity > 0) n.store_capacity = m.store_capacity;
  for (const auto& model : n.models) known_models_.insert(model.name);
  store_node(n);
  return true;
}

std::set<uint64_t> node_registry::offline(node_entry& n) {
  n.online = false;
  n.credit = 0;
  node_by_rid_.erase(n.routing_id);
  n.routing_id.clear();
  store_.node_seen(n.name, false, n.last_seen_ms);
  return std::exchange(n.running, {});
}

void node_registry::lost_attempt(node_entry& n, uint64_t job_id, uint32_t attempt,
                                 const std::string& why, bool handback) {
  count_loss(n, cfg_, job_id, attempt, why, handback);
}

bool node_registry::release(const std::string& rid, const wire::release_node& m) {
  auto it = nodes_.find(m.name);
  if (it == nodes_.end()) {
    out_.send_error(rid, m.request_id, wire::error_code::not_found, "no node " + m.name);
    return false;
  }
  const bool was = forgive_losses(it->second, net::steady::now());
  spdlog::info("node {} {} by an admin", m.name,
               was ? "released from quarantine" : "(not quarantined) had its losses forgiven");
  out_.send(rid, wire::ok{m.request_id});
  return true;
}

void node_registry::forget(const std::string& rid, const wire::forget_node& m) {
  auto it = nodes_.find(m.name);
  if (it == nodes_.end()) {
    out_.send_error(rid, m.request_id, wire::error_code::not_found, "no node " + m.name);
    return;
  }
  if (it->second.online) {
    out_.send_error(rid, m.request_id, wire::error_code::invalid_params,
                    "node " + m.name + " is online; stop it before forgetting it");
    return;
  }
  store_.node_forget(m.name);
  nodes_.erase(it);
  // The models only it advertised are no longer known (submits for them need wait_model).
  known_models_.clear();
  for (auto& name : store_.known_models()) known_models_.insert(std::move(name));
  spdlog::info("node {} forgotten", m.name);
  out_.send(rid, wire::ok{m.request_id});
}

bool node_registry::quarantine_timers(net::steady::time_point now) {
  bool ended = false;
  for (auto& [name, n] : nodes_) ended = quarantine_ended(n, now) || ended;
  admission_.forget_idle(now);
  return ended;
}

void node_registry::liveness(net::steady::time_point now, bool storage_down,
                             const std::function<void(node_entry&, const std::string&)>& lost) {
  const auto dead_after = std::chrono::milliseconds(int64_t(cfg_.heartbeat_ms) * cfg_.liveness);
  for (auto& [name, n] : nodes_) {
    if (!n.online) continue;
    if (now - n.last_heard > dead_after) {
      spdlog::warn("node {} stopped responding (nothing heard for {} ms); it is offline", name,
                   dead_after.count());
      lost(n, "node " + name + " stopped responding");
      continue;
    }
    count_missed_heartbeats(n, now);
    if (now - n.last_sent >= std::chrono::milliseconds(cfg_.heartbeat_ms / 2)) {
      out_.send(n.routing_id, wire::heartbeat{});
    }
    // last_seen is written every few intervals, not on every message, and not while the store
    // refuses writes: a failed write fails its whole turn, and the time is only informative.
    if (!storage_down &&
        n.last_heard - n.last_stored > std::chrono::milliseconds(cfg_.heartbeat_ms) * 5) {
      store_.node_seen(name, true, n.last_seen_ms);
      n.last_stored = n.last_heard;
    }
  }
}

void node_registry::count_missed_heartbeats(node_entry& n, net::steady::time_point now) {
  // A node sends something at least every interval; one silent for more than an interval and a
  // half has missed a heartbeat, for more than two and a half two, and so on.
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(cfg_.heartbeat_ms, 1));
  const auto silence = now - n.last_heard;
  if (silence < interval + interval / 2) return;
  const auto missed = uint32_t((silence - interval / 2) / interval);
  if (missed > n.missed_counted) {
    metrics_.add(metric::heartbeats_missed, {n.name}, missed - n.missed_counted);
    n.missed_counted = missed;
  }
}

void node_registry::sent(const std::string& rid, net::steady::time_point now) {
  if (auto it = node_by_rid_.find(rid); it != node_by_rid_.end()) {
    nodes_[it->second].last_sent = now;
  }
}

void node_registry::store_seen() {
  for (auto& [name, n] : nodes_) {
    if (n.online) store_.node_seen(name, false, n.last_seen_ms);
  }
}

void node_registry::clear_running() {
  for (auto& [name, n] : nodes_) n.running.clear();
}

void node_registry::credit_free_slots() {
  for (auto& [name, n] : nodes_) {
    if (n.online) n.credit = n.free_slots();
  }
}

node_entry* node_registry::find(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

void node_registry::load() {
  for (auto& n : store_.nodes()) {
    node_entry e;
    e.name = n.name;
    e.hostname = n.hostname;
    e.engine = n.engine;
    e.slots = n.slots;
    e.hardware = n.hardware;
    e.models = n.models;
    e.key = n.key;
    e.last_seen_ms = n.last_seen_ms;
    nodes_[n.name] = std::move(e);
  }
  for (auto& m : store_.known_models()) known_models_.insert(m);
}

}  // namespace hearth::broker
