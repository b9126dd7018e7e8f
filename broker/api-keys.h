// API keys: the secrets HTTP clients of hearth-gateway present (Authorization: Bearer), and the
// broker's registry of them (schema/PROTOCOL.md section 13.5).
//
// A secret is "hk_" and 43 characters of base64url: 32 bytes from OpenSSL's RAND_bytes. The
// broker keeps only its SHA-256 (a secret of 256 random bits needs no salt or slow hash: nobody
// can search that space), the key's id (the first 12 hex digits of that hash, the owner of its
// jobs as "api:" + id) and a prefix of the secret that tells keys apart in listings.
//
// The registry is the in-memory copy of the store's api_keys table, loaded at start and changed
// in step with it, so that checking a key on a request costs one hash and one lookup, no SQL.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/job-store.h"

namespace hearth::broker {

// Keys in force at once; with the revoked ones shown after them, a listing stays one message.
inline constexpr size_t api_keys_in_force_max = 1000;
// Characters of the secret kept to tell keys apart ("hk_" and 5 more: 30 of its 256 bits).
inline constexpr size_t api_key_prefix_chars = 8;
// last_used_ms is written at most this often per key, so a busy key costs no write per request.
inline constexpr int64_t api_key_used_interval_ms = 60'000;

// A new secret: "hk_" + base64url (no padding) of 32 random bytes. Throws std::runtime_error when
// the system has no randomness to give.
std::string api_key_secret_new();
// SHA-256 of the secret, as 64 lowercase hex digits: what the store keeps.
std::string api_key_hash(std::string_view secret);
// The key's id: the first 12 hex digits of its hash.
std::string api_key_id_of(std::string_view hash);
// The owner its jobs record: "api:" + id.
std::string api_key_owner(std::string_view id);
// "" when `name` is a valid key name (1 to 64 of A-Z a-z 0-9 . _ -), else the rule it breaks.
std::string api_key_name_check(std::string_view name);

class api_key_registry {
 public:
  // Replaces everything with the store's records.
  void load(std::vector<api_key_record> records);

  // The key in force whose secret this is, or nullptr.
  const api_key_record* find_secret(std::string_view secret) const;
  // The key in force named `name`, or nullptr.
  const api_key_record* find_in_force(std::string_view name) const;
  // Any key, revoked ones included (their jobs stay in the history), by id.
  const api_key_record* find_id(std::string_view id) const;
  size_t in_force() const { return by_hash_.size(); }

  void add(api_key_record r);
  void revoke(const std::string& id, int64_t now_ms);
  // Whether the key's last use should be written now (at most once per interval), and if so
  // notes it as written.
  bool note_use(const std::string& id, int64_t now_ms);

  // In force first (newest first), then revoked (newest revocation first).
  std::vector<const api_key_record*> listing() const;

 private:
  std::map<std::string, api_key_record, std::less<>> by_id_;
  std::unordered_map<std::string, std::string> by_hash_;     // hash -> id, keys in force only
  std::map<std::string, std::string, std::less<>> by_name_;  // name -> id, keys in force only
};

}  // namespace hearth::broker
