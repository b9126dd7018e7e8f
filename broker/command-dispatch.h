// Each message that passed the peer gate, by its command, to the one part that owns what it
// changes (the table in README.md): a client request decoded and handed on with the identity it
// acts as (its peer, or the API key it presents), a node's message to the node registry or the
// node attempts. A part changes state and queues its replies in turn_output; the turn loop
// (broker.cpp) commits before any of them is sent.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "broker/api-key-service.h"
#include "broker/client-sessions.h"
#include "broker/job-history.h"
#include "broker/job-store.h"
#include "broker/job-table.h"
#include "broker/metrics-report.h"
#include "broker/model-placement.h"
#include "broker/node-attempts.h"
#include "broker/node-registry.h"
#include "broker/peer.h"
#include "broker/pipelines.h"
#include "broker/storage-gate.h"
#include "broker/turn-output.h"
#include "broker/zap-handler.h"
#include "schema/messages.h"

namespace hearth::broker {

class command_dispatch {
 public:
  // `zap`: the ZAP handler once run() made one (with --auth), for get_metrics' connection count.
  command_dispatch(job_store& store, turn_output& out, const storage_gate& storage, job_table& jobs,
                   node_registry& nodes, node_attempts& attempts, client_sessions& clients,
                   job_history& history, api_key_service& api_keys, const metrics_report& report,
                   const std::unique_ptr<zap_handler>& zap, model_placement& placement,
                   pipeline_table& pipelines)
      : store_(store),
        out_(out),
        storage_(storage),
        jobs_(jobs),
        nodes_(nodes),
        attempts_(attempts),
        clients_(clients),
        history_(history),
        api_keys_(api_keys),
        report_(report),
        zap_(zap),
        placement_(placement),
        pipelines_(pipelines) {}

  // A message of `who` on connection `rid`; `node`: the node that said hello on it, if any (node
  // commands from any other connection are answered unknown_node).
  void handle(const std::string& rid, const peer& who, wire::command cmd, std::string_view body,
              node_entry* node);

 private:
  // Decodes a client request and hands it on with the identity it acts as: `who`, or the API key
  // it presents. A malformed one gets error_reply(malformed), an unknown key unauthorized.
  template <class M, class F>
  void client_request(const std::string& rid, const peer& who, std::string_view body,
                      F&& handle_request);
  void node_message(node_entry& node, wire::command cmd, std::string_view body);

  job_store& store_;
  turn_output& out_;
  const storage_gate& storage_;
  job_table& jobs_;
  node_registry& nodes_;
  node_attempts& attempts_;
  client_sessions& clients_;
  job_history& history_;
  api_key_service& api_keys_;
  const metrics_report& report_;
  const std::unique_ptr<zap_handler>& zap_;
  model_placement& placement_;
  pipeline_table& pipelines_;
};

}  // namespace hearth::broker
