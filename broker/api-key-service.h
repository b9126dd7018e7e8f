// API keys at the broker (schema/PROTOCOL.md section 13.5): a client request that presents one
// acts as the key, whoami says who a peer or key is, and admins create, list and revoke keys.
// The registry in memory (api-keys.h) is kept in step with the store's api_keys table, in the
// turn's transaction; a turn whose commit fails reloads it (load()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "broker/api-keys.h"
#include "broker/job-store.h"
#include "broker/log-limiter.h"
#include "broker/metrics.h"
#include "broker/peer.h"
#include "broker/storage-gate.h"
#include "broker/turn-output.h"

namespace hearth::broker {

class api_key_service {
 public:
  // `auth_log`: the broker's limiter of lines a peer can provoke, shared with its other refusals.
  api_key_service(job_store& store, turn_output& out, const storage_gate& storage,
                  broker_metrics& metrics, log_limiter& auth_log)
      : store_(store), out_(out), storage_(storage), metrics_(metrics), auth_log_(auth_log) {}

  void load();
  // The identity of the key `secret`, or nullopt after replying unauthorized (unknown or revoked
  // key, or a peer that may not present one).
  std::optional<peer> resolve(const std::string& rid, uint64_t request_id, const peer& who,
                              const std::string& secret);
  // The key of an id ("api:" + id owns its jobs), revoked ones included.
  const api_key_record* find_id(std::string_view id) const { return keys_.find_id(id); }

  void whoami(const std::string& rid, const peer& who, const wire::whoami& m);
  void create(const std::string& rid, const wire::create_api_key& m);
  void list(const std::string& rid, const wire::list_api_keys& m) const;
  void revoke(const std::string& rid, const wire::revoke_api_key& m);

 private:
  job_store& store_;
  turn_output& out_;
  const storage_gate& storage_;
  broker_metrics& metrics_;
  log_limiter& auth_log_;
  api_key_registry keys_;  // the store's api_keys table, kept in step with it
};

}  // namespace hearth::broker
