#include "broker/allow-list.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>
#include <system_error>

namespace hearth::broker {

namespace fs = std::filesystem;

namespace {
// The role folders, in the order they are scanned.
constexpr std::pair<const char*, peer_role> role_dirs[] = {
    {"nodes", peer_role::node}, {"clients", peer_role::client}, {"admins", peer_role::admin}};

// Bounds a rescan of a folder someone filled by mistake (or on purpose).
constexpr size_t max_certificates = 10000;
}  // namespace

std::string_view peer_role_name(peer_role r) {
  switch (r) {
    case peer_role::node:
      return "node";
    case peer_role::client:
      return "client";
    case peer_role::admin:
      return "admin";
  }
  return "unknown";
}

result<allow_list> allow_list::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return error{"--auth " + dir + ": not a directory (make one with `hearth keygen broker --dir " +
                 dir + "`)"};
  }
  auto cert = net::curve_cert_load_secret(dir + "/broker.key");
  if (!cert) {
    return error{cert.message() +
                 " (the broker's secret certificate; make it with `hearth keygen " +
                 "broker --dir " + dir + "`)"};
  }
  allow_list a;
  a.dir_ = dir;
  a.broker_ = std::move(cert.value());
  a.refresh();
  return a;
}

namespace {
std::string folder_stamp(const std::string& dir) {
  std::string s;
  for (const auto& [sub, role] : role_dirs) {
    std::error_code ec;
    const auto t = fs::last_write_time(fs::path(dir) / sub, ec);
    s += ec ? "-;" : std::to_string(t.time_since_epoch().count()) + ";";
  }
  return s;
}
}  // namespace

void allow_list::refresh_if_changed() {
  if (folder_stamp(dir_) != stamp_) refresh();
}

size_t allow_list::refresh() {
  stamp_ = folder_stamp(dir_);
  std::map<std::string, allowed_key, std::less<>> keys;
  std::set<std::string> ambiguous;
  std::map<std::string, std::string> problems;
  size_t seen = 0;
  for (const auto& [sub, role] : role_dirs) {
    std::error_code ec;
    fs::directory_iterator it(fs::path(dir_) / sub, ec), end;
    for (; !ec && it != end && seen < max_certificates; it.increment(ec)) {
      const fs::path& p = it->path();
      if (p.extension() != ".pub") continue;
      ++seen;
      auto cert = net::curve_cert_load(p.string());
      if (!cert) {
        problems[p.string()] = cert.message();
        continue;
      }
      allowed_key k{role, p.stem().string()};
      auto [pos, inserted] = keys.emplace(cert->public_key, k);
      if (!inserted && pos->second.role != role) ambiguous.insert(cert->public_key);
    }
  }
  for (const auto& key : ambiguous) {
    problems["key " + key] = "it is in more than one of nodes/, clients/ and admins/; refused";
    keys.erase(key);
  }
  // Each problem is logged once, not on every rescan.
  for (const auto& [what, why] : problems) {
    if (auto w = warned_.find(what); w == warned_.end() || w->second != why) {
      spdlog::warn("auth: {}: {}", what, why);
    }
  }
  warned_ = std::move(problems);
  if (keys.size() != keys_.size()) {
    spdlog::info("auth: {} keys allowed ({})", keys.size(), dir_);
  }
  for (const auto& [key, old] : keys_) {
    const auto now = keys.find(key);
    if (now == keys.end() || now->second.role != old.role) {
      ++generation_;
      break;
    }
  }
  keys_ = std::move(keys);
  return keys_.size();
}

const allowed_key* allow_list::find(std::string_view z85_public) const {
  auto it = keys_.find(z85_public);
  return it == keys_.end() ? nullptr : &it->second;
}

bool endpoint_is_loopback(std::string_view e) {
  if (e.starts_with("ipc://") || e.starts_with("inproc://")) return true;
  if (!e.starts_with("tcp://")) return false;
  e.remove_prefix(6);
  // tcp://[::1]:5555, tcp://127.0.0.1:5555, tcp://localhost:5555; a "source;" prefix is a
  // connect-side form and not loopback-only.
  if (e.starts_with("[::1]:")) return true;
  const auto colon = e.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = e.substr(0, colon);
  if (host == "localhost") return true;
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

}  // namespace hearth::broker
