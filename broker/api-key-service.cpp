// API keys at the broker (api-key-service.h).
#include "broker/api-key-service.h"

#include <spdlog/spdlog.h>

#include "broker/reply-list.h"

namespace hearth::broker {

void api_key_service::load() {
  keys_.load(store_.api_keys());
}

std::optional<peer> api_key_service::resolve(const std::string& rid, uint64_t request_id,
                                             const peer& who, const std::string& secret) {
  // A node key never reaches here with auth on (its role may not send client requests); the
  // rule is stated once more where keys are resolved, so no later change can let one through.
  if (who.role == peer_role::node) {
    out_.send_error(rid, request_id, wire::error_code::unauthorized,
                    "a node key may not present an API key");
    return std::nullopt;
  }
  // A secret longer than any the broker makes cannot be one of its keys: not even hashed.
  const api_key_record* k =
      secret.size() <= wire::max_api_key_bytes ? keys_.find_secret(secret) : nullptr;
  if (!k) {
    metrics_.add(metric::auth_failures, {"api_key"});
    if (auto more = auth_log_.admit(net::steady::now())) {
      spdlog::warn("refused a request with an unknown or revoked API key from {}{}",
                   who.name.empty()
                       ? std::string("a peer without auth")
                       : std::string(peer_role_name(who.role)) + " key '" + who.name + "'",
                   *more);
    }
    out_.send_error(rid, request_id, wire::error_code::unauthorized, "unknown or revoked API key");
    return std::nullopt;
  }
  // While the store refuses writes, a read request must not fail for want of this one.
  const int64_t now = net::wall_ms();
  if (!storage_.down(net::steady::now()) && keys_.note_use(k->id, now)) {
    store_.api_key_used(k->id, now);
  }
  return peer{k->admin ? peer_role::admin : peer_role::client, api_key_owner(k->id), k->name};
}

void api_key_service::whoami(const std::string& rid, const peer& who, const wire::whoami& m) {
  out_.send(rid,
            wire::identity{m.request_id, who.key, who.name, std::string(peer_role_name(who.role))});
}

void api_key_service::create(const std::string& rid, const wire::create_api_key& m) {
  using wire::error_code;
  if (storage_.refuse(out_, rid, m.request_id)) return;
  if (auto e = api_key_name_check(m.name); !e.empty()) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params, e);
  }
  if (keys_.find_in_force(m.name)) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params,
                           "an API key named '" + m.name +
                               "' is in force already (a name is unique among the keys in force); "
                               "revoke it first or choose another name");
  }
  if (keys_.in_force() >= api_keys_in_force_max) {
    return out_.send_error(rid, m.request_id, error_code::limit_reached,
                           std::to_string(keys_.in_force()) +
                               " API keys are in force, the limit is " +
                               std::to_string(api_keys_in_force_max) + "; revoke some first");
  }
  api_key_record k;
  std::string secret;
  try {
    // A new id is never one any key had, revoked ones included: their jobs keep it as owner.
    do {
      secret = api_key_secret_new();
      k.hash = api_key_hash(secret);
      k.id = api_key_id_of(k.hash);
    } while (keys_.find_id(k.id));
  } catch (const std::runtime_error& e) {
    return out_.send_error(rid, m.request_id, error_code::internal, e.what());
  }
  k.name = m.name;
  k.admin = m.admin;
  k.prefix = secret.substr(0, api_key_prefix_chars);
  k.created_ms = net::wall_ms();
  store_.api_key_insert(k);
  spdlog::info("{} API key '{}' created (id {}, {}...)", k.admin ? "admin" : "client", k.name, k.id,
               k.prefix);
  keys_.add(k);
  out_.send(rid, wire::api_key_created{m.request_id, m.name, secret});
}

void api_key_service::list(const std::string& rid, const wire::list_api_keys& m) const {
  wire::api_keys_reply r;
  r.request_id = m.request_id;
  // Keys in force come first and are capped below reply_max_items, so all of them are listed;
  // the oldest revoked ones are left out when the list would not fit one message.
  reply_list list(r, &wire::api_keys_reply::keys);
  for (const api_key_record* k : keys_.listing()) {
    list.offer(wire::api_key_info{k->name, k->prefix, k->created_ms, k->revoked_ms, k->last_used_ms,
                                  k->admin});
  }
  out_.send(rid, r);
}

void api_key_service::revoke(const std::string& rid, const wire::revoke_api_key& m) {
  using wire::error_code;
  if (storage_.refuse(out_, rid, m.request_id)) return;
  if (auto e = api_key_name_check(m.name); !e.empty()) {
    return out_.send_error(rid, m.request_id, error_code::invalid_params, e);
  }
  const api_key_record* k = keys_.find_in_force(m.name);
  if (!k) {
    return out_.send_error(rid, m.request_id, error_code::not_found,
                           "no API key named '" + m.name + "' is in force");
  }
  const std::string id = k->id;
  const int64_t now = net::wall_ms();
  store_.api_key_revoke(id, now);
  keys_.revoke(id, now);
  spdlog::info("API key '{}' revoked (id {})", m.name, id);
  out_.send(rid, wire::ok{m.request_id});
}

}  // namespace hearth::broker
