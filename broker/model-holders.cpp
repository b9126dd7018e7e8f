// Which online node holds which model, by digest (model-holders.h).
#include "broker/model-holders.h"

#include <algorithm>

namespace hearth::broker {

const wire::model_info* model_advertised(const node_entry& n, const std::string& model) {
  for (const auto& m : n.models) {
    if (m.name == model) return &m;
  }
  return nullptr;
}

std::string listed_digest(const node_map& nodes, const std::string& model) {
  for (const auto& [name, n] : nodes) {
    if (!n.online) continue;
    if (const auto* m = model_advertised(n, model); m && !m->digest.empty()) return m->digest;
  }
  return "";
}

std::vector<std::string> model_holders(const node_map& nodes, const std::string& model,
                                       const std::string& digest) {
  std::vector<std::string> holders;
  if (digest.empty()) return holders;
  for (const auto& [name, n] : nodes) {
    if (!n.online) continue;
    if (const auto* m = model_advertised(n, model); m && m->digest == digest) {
      holders.push_back(name);
    }
  }
  return holders;
}

uint64_t model_bytes(const wire::model_info& m) {
  uint64_t total = 0;
  for (const auto& f : m.files) total += f.size;
  return std::max(total, m.size_bytes);
}

uint64_t node_free_memory(const node_entry& n) {
  uint64_t free = n.hardware.memory_available;
  for (const auto& g : n.hardware.gpus) free += g.memory_free;
  return free;
}

std::string peer_endpoint(const node_entry& n, uint32_t port) {
  std::string host = n.address.empty() ? "127.0.0.1" : n.address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace hearth::broker
