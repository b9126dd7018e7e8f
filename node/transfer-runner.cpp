#include "node/transfer-runner.h"

#include <spdlog/spdlog.h>

namespace hearth::node {

struct transfer_runner::transfer {
  std::thread worker;
  std::atomic<bool> cancel{false};
  std::mutex mutex;  // status and finished, written by the worker
  wire::transfer_status status;
  bool finished = false;
  std::chrono::steady_clock::time_point last_sent;
};

transfer_runner::transfer_runner(store::model_store& store, transfer_runner_config cfg)
    : store_(store), cfg_(std::move(cfg)) {}

transfer_runner::~transfer_runner() {
  for (auto& [id, t] : transfers_) t->cancel = true;
  for (auto& [id, t] : transfers_) t->worker.join();
}

size_t transfer_runner::running() const {
  size_t n = 0;
  for (const auto& [id, t] : transfers_) {
    std::lock_guard lock(t->mutex);
    n += !t->finished;
  }
  return n;
}

wire::transfer_status transfer_runner::start(const wire::model_fetch& m,
                                             std::set<std::string> in_use) {
  if (auto it = transfers_.find(m.transfer_id); it != transfers_.end()) {
    std::lock_guard lock(it->second->mutex);
    return it->second->status;
  }
  wire::transfer_status refused{m.transfer_id, "failed"};
  if (m.peers.empty() && !cfg_.pull) {
    refused.error = "this node cannot pull from the internet";
    return refused;
  }
  if (running() >= cfg_.max_running) {
    refused.error = "this node runs " + std::to_string(cfg_.max_running) + " transfers already";
    return refused;
  }
  auto t = std::make_unique<transfer>();
  t->status = {m.transfer_id, "running"};
  t->status.from = m.peers.empty() ? "internet" : "peer:" + m.peers.front().node;
  for (const auto& f : m.files) t->status.bytes_total += f.size;
  t->last_sent = std::chrono::steady_clock::now();
  auto& ref = *t;
  spdlog::info("transfer {}: {} '{}' from {}", m.transfer_id,
               m.peers.empty() ? "pulling" : "copying", m.name,
               m.peers.empty() ? m.source : t->status.from);
  const wire::transfer_status first = t->status;
  t->worker = std::thread([this, &ref, m, in_use = std::move(in_use)] { work(ref, m, in_use); });
  transfers_.emplace(m.transfer_id, std::move(t));
  return first;
}

void transfer_runner::work(transfer& t, const wire::model_fetch& m,
                           const std::set<std::string>& in_use) {
  auto finish = [&](std::string state, std::string digest, std::string error) {
    std::lock_guard lock(t.mutex);
    t.status.state = std::move(state);
    t.status.digest = std::move(digest);
    t.status.error = std::move(error);
    t.finished = true;
  };
  try {
    if (!m.peers.empty()) {
      uint64_t missing = 0;
      for (const auto& f : m.files)
        if (!store_.has_blob(f.digest)) missing += f.size;
      for (const auto& name : store_.make_room(missing, in_use))
        spdlog::info("transfer {}: evicted model {} to make room", m.transfer_id, name);
      auto r = fetch_model(
          store_, m, cfg_.fetch,
          [&](const fetch_progress& p) {
            std::lock_guard lock(t.mutex);
            t.status.bytes_done = p.bytes_done;
            t.status.bytes_total = p.bytes_total;
            t.status.bytes_from_peers = p.bytes_from_peers;
            t.status.from = p.from;
          },
          &t.cancel);
      if (!r) {
        spdlog::warn("transfer {}: copying '{}' failed: {}", m.transfer_id, m.name, r.message());
        return finish("failed", "", r.message());
      }
      spdlog::info("transfer {}: '{}' copied ({})", m.transfer_id, r->name, r->digest);
      return finish("done", r->digest, "");
    }
    const store::manifest got = cfg_.pull(
        store_, m, in_use,
        [&](const pull_report& p) {
          std::lock_guard lock(t.mutex);
          t.status.bytes_done = p.bytes_done;
          t.status.bytes_total = p.bytes_total;
        },
        &t.cancel);
    spdlog::info("transfer {}: '{}' pulled ({})", m.transfer_id, got.name, got.digest);
    finish("done", got.digest, "");
  } catch (const std::exception& e) {
    spdlog::warn("transfer {}: '{}' failed: {}", m.transfer_id, m.name.empty() ? m.source : m.name,
                 e.what());
    finish("failed", "", e.what());
  }
}

std::vector<wire::transfer_status> transfer_runner::due(std::chrono::steady_clock::time_point now,
                                                        bool& models_added) {
  std::vector<wire::transfer_status> out;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    transfer& t = *it->second;
    bool finished = false;
    {
      std::lock_guard lock(t.mutex);
      finished = t.finished;
      if (finished || now - t.last_sent >= cfg_.status_every) {
        out.push_back(t.status);
        t.last_sent = now;
      }
    }
    if (!finished) {
      ++it;
      continue;
    }
    t.worker.join();
    if (out.back().state == "done") models_added = true;
    it = transfers_.erase(it);
  }
  return out;
}

}  // namespace hearth::node
