// The broker's durable record: jobs, their events and the nodes, in one SQLite file (WAL).
//
// The broker's event loop is the only user (not thread-safe). It groups every change made while
// handling a burst of messages into one transaction: begin() ... commit(), and only then sends
// the replies, so anything acknowledged to a client is in the WAL before the client hears of it
// and survives a SIGKILL of the broker (synchronous=NORMAL: durable against a process crash; a
// power cut may lose the last transactions, never corrupt the file).
//
// Errors: open() returns an error value for a file that cannot be opened or is not a hearth
// database; after that a failing statement (disk full, ...) throws std::runtime_error naming the
// statement, which the broker treats as fatal for the request at hand.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/messages.h"

namespace hearth::broker {

// A job as stored. Row ids are the job ids shown to users (1, 2, 3 ...).
struct job_row {
  uint64_t id = 0;
  std::string model;
  std::string prompt;
  std::vector<wire::chat_message> messages;
  wire::job_params params;
  int32_t priority = 0;
  wire::job_state state = wire::job_state::queued;
  std::string node;       // node of the latest attempt ("" before the first)
  uint32_t attempts = 0;  // attempts started so far
  int64_t created_ms = 0;
  int64_t started_ms = 0;  // first token of the latest attempt's prompt processing
  int64_t finished_ms = 0;
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  std::string stop_reason;
  std::string error;
  std::string output;  // the latest attempt's text so far
  std::string owner;   // the submitting client's public key (Z85); "" on a broker without auth
};

struct job_filter {
  std::optional<wire::job_state> state;
  std::string model;                 // "" = any
  std::optional<std::string> owner;  // one client's jobs only
  uint32_t limit = 20;               // newest first
};

class job_store {
 public:
  // Opens or creates the database (tables created if missing; schema version checked).
  static result<std::unique_ptr<job_store>> open(const std::string& path);
  ~job_store();

  void begin();
  void commit();

  // Inserts a queued job; sets row.id. Records the "queued" event.
  uint64_t insert_job(job_row& row, int64_t now_ms);

  // Changes of state, each also recorded as an event (event name, attempt, node, detail):
  // assigned: attempts = attempt, node = node, state running   (event "assigned")
  void job_assigned(uint64_t id, uint32_t attempt, const std::string& node, int64_t now_ms);
  // started: started_ms, n_prompt                               (event "started")
  void job_started(uint64_t id, uint32_t attempt, uint32_t n_prompt, int64_t now_ms);
  // requeued: state queued, output cleared, n_gen 0             (event "requeued", detail = why)
  void job_requeued(uint64_t id, uint32_t attempt, const std::string& node, const std::string& why,
                    int64_t now_ms);
  // finished: state (completed/failed/cancelled), finished_ms, counts, stop reason, error, output
  void job_finished(uint64_t id, uint32_t attempt, const std::string& node, wire::job_state state,
                    const std::string& stop_reason, const std::string& error, uint32_t n_prompt,
                    uint32_t n_gen, const std::string& output, int64_t now_ms);
  // The output streamed so far (batched: the broker calls this every few hundred ms per job).
  void job_output(uint64_t id, const std::string& output, uint32_t n_gen);

  std::optional<job_row> job(uint64_t id);
  std::vector<wire::job_event> job_events(uint64_t id);
  std::vector<job_row> jobs(const job_filter& f);  // output not filled (history tables stay light)
  // Jobs in state queued or running, oldest first: what a restarted broker must take over.
  std::vector<job_row> unfinished_jobs();
  uint64_t job_count();

  // Nodes: upserted on hello and status changes, last_seen written at most every few seconds.
  void node_upsert(const wire::node_summary& n);
  void node_seen(const std::string& name, bool online, int64_t last_seen_ms);
  std::vector<wire::node_summary> nodes();
  // Removes a node, its devices and models, and the models only it advertised (known_models).
  void node_forget(const std::string& name);
  // Every model any node has ever advertised (so a model of an offline node is not "unknown").
  std::vector<std::string> known_models();

 private:
  struct impl;
  explicit job_store(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace hearth::broker
