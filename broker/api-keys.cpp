#include "broker/api-keys.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "schema/messages.h"

namespace hearth::broker {
namespace {

constexpr std::string_view k_secret_prefix = "hk_";
constexpr size_t k_secret_bytes = 32;
constexpr size_t k_id_hex = 12;

std::string base64url(const unsigned char* p, size_t n) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string s;
  uint32_t bits = 0;
  int n_bits = 0;
  for (size_t i = 0; i < n; ++i) {
    bits = (bits << 8) | p[i];
    n_bits += 8;
    while (n_bits >= 6) {
      n_bits -= 6;
      s += alphabet[(bits >> n_bits) & 63];
    }
  }
  if (n_bits > 0) s += alphabet[(bits << (6 - n_bits)) & 63];
  return s;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

std::string api_key_secret_new() {
  unsigned char bytes[k_secret_bytes];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    throw std::runtime_error("cannot make an API key: OpenSSL's RAND_bytes has no randomness");
  }
  return std::string(k_secret_prefix) + base64url(bytes, sizeof bytes);
}

std::string api_key_hash(std::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &n, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("cannot hash an API key: OpenSSL's EVP_Digest(SHA-256) failed");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s += hex[digest[i] >> 4];
    s += hex[digest[i] & 15];
  }
  return s;
}

std::string api_key_id_of(std::string_view hash) {
  return std::string(hash.substr(0, k_id_hex));
}

std::string api_key_owner(std::string_view id) {
  return "api:" + std::string(id);
}

std::string api_key_name_check(std::string_view name) {
  const std::string rule = "an API key name is 1 to " +
                           std::to_string(wire::max_api_key_name_bytes) +
                           " characters of A-Z, a-z, 0-9, '.', '_' and '-'";
  if (name.empty()) return rule + "; the name is empty";
  if (name.size() > wire::max_api_key_name_bytes) {
    return rule + "; the name has " + std::to_string(name.size()) + " bytes";
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!name_char(name[i])) return rule + "; byte " + std::to_string(i + 1) + " is not one";
  }
  return "";
}

void api_key_registry::load(std::vector<api_key_record> records) {
  by_id_.clear();
  by_hash_.clear();
  by_name_.clear();
  for (auto& r : records) add(std::move(r));
}

const api_key_record* api_key_registry::find_secret(std::string_view secret) const {
  // Looked up by hash: how long the lookup takes tells nothing about the secrets.
  auto it = by_hash_.find(api_key_hash(secret));
  return it == by_hash_.end() ? nullptr : find_id(it->second);
}

const api_key_record* api_key_registry::find_in_force(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : find_id(it->second);
}

const api_key_record* api_key_registry::find_id(std::string_view id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

void api_key_registry::add(api_key_record r) {
  if (r.revoked_ms == 0) {
    by_hash_[r.hash] = r.id;
    by_name_[r.name] = r.id;
  }
  const std::string id = r.id;
  by_id_[id] = std::move(r);
}

void api_key_registry::revoke(const std::string& id, int64_t now_ms) {
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.revoked_ms != 0) return;
  it->second.revoked_ms = now_ms;
  by_hash_.erase(it->second.hash);
  by_name_.erase(it->second.name);
}

bool api_key_registry::note_use(const std::string& id, int64_t now_ms) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  if (it->second.last_used_ms != 0 && now_ms - it->second.last_used_ms < api_key_used_interval_ms) {
    return false;
  }
  it->second.last_used_ms = now_ms;
  return true;
}

std::vector<const api_key_record*> api_key_registry::listing() const {
  std::vector<const api_key_record*> out;
  for (const auto& [id, r] : by_id_) out.push_back(&r);
  std::sort(out.begin(), out.end(), [](const api_key_record* a, const api_key_record* b) {
    // In force (revoked_ms 0) first; within each group, the most recent event first.
    const bool a_live = a->revoked_ms == 0, b_live = b->revoked_ms == 0;
    if (a_live != b_live) return a_live;
    const int64_t at = a_live ? a->created_ms : a->revoked_ms;
    const int64_t bt = b_live ? b->created_ms : b->revoked_ms;
    return std::tie(bt, b->id) < std::tie(at, a->id);
  });
  return out;
}

}  // namespace hearth::broker
