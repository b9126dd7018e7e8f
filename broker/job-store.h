// The broker's durable record: jobs, their events, their output and the nodes, in one SQLite file
// (WAL journal).
//
// The broker's event loop is the only user (not thread-safe). It groups every change made while
// handling a burst of messages into one transaction: begin() ... commit(), and only then sends
// the replies. With durability::full (the default) commit() returns only after the WAL is
// fsync'd, so anything acknowledged to a client survives a power cut; durability::normal syncs
// only at checkpoints (survives a crash of the broker process, a power cut may lose the last
// transactions, never corrupts the file).
//
// One broker per database: open() takes an exclusive lock on the database file (store-lock.h)
// held for the life of the store; a second open of the same file, by any name (a symlink, a hard
// link), fails naming the holder's pid.
//
// The WAL stays bounded: a checkpointer thread (wal-checkpointer.h) runs passive checkpoints while
// the broker writes and truncates the WAL when it has been idle.
//
// Errors: open() returns an error value for a file that cannot be opened, is locked by another
// broker, or is not a hearth database. After that a failing statement (disk full, I/O error)
// throws store_error naming the statement; the broker then calls rollback() and treats the turn
// as not done (broker.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/sqlite.h"
#include "schema/messages.h"

namespace hearth::broker {

// A statement or commit failed (SQLite's message and extended code). The broker treats every kind
// alike (a full disk, a file-size limit, an I/O error): the turn is undone and retried later.
using store_error = sqlite::failure;

// A job as stored, without its output (read_output pages through that). Row ids are the job ids
// shown to users (1, 2, 3 ...).
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
  uint32_t n_gen = 0;         // tokens of the latest attempt stored so far
  uint64_t output_bytes = 0;  // bytes of the latest attempt's output stored so far
  std::string stop_reason;
  std::string error;
  std::string owner;        // the submitting client's public key (Z85); "" on a broker without auth
  std::string request_key;  // the submit's idempotency key ("" = none); unique per owner
};

// An API key as stored (broker/api-keys.h): never its secret, only the secret's SHA-256.
struct api_key_record {
  std::string id;      // the first 12 hex digits of hash; jobs record "api:" + id as owner
  std::string name;    // unique among keys in force
  std::string hash;    // SHA-256 of the secret, 64 hex digits
  std::string prefix;  // the secret's first characters, to tell keys apart
  int64_t created_ms = 0;
  int64_t revoked_ms = 0;    // 0: in force
  int64_t last_used_ms = 0;  // 0: never
  bool admin = false;        // an admin key: sees and cancels every job (otherwise a client)
};

struct job_filter {
  std::optional<wire::job_state> state;
  std::string model;                 // "" = any
  std::optional<std::string> owner;  // one client's jobs only
  uint32_t limit = 20;               // newest first
};

// What prune() deletes: finished jobs older than max_age_ms, and finished jobs beyond the newest
// keep_last finished ones. 0 turns a rule off.
struct retention {
  uint64_t max_age_ms = 0;
  uint64_t keep_last = 0;
  bool any() const { return max_age_ms != 0 || keep_last != 0; }
};

struct store_options {
  enum class durability { full, normal };
  durability sync = durability::full;
  // The WAL is truncated back to this size after a checkpoint (PRAGMA journal_size_limit), and a
  // WAL over it makes the checkpointer try harder (it never blocks the broker's writes).
  uint64_t wal_limit_bytes = 64 << 20;
};

// Figures for logs, tests and metrics.
struct store_stats {
  uint64_t db_bytes = 0;             // the database file
  uint64_t wal_bytes = 0;            // its -wal file
  uint64_t checkpoints = 0;          // checkpoints that ran (passive or truncate)
  uint64_t checkpoint_failures = 0;  // checkpoints that failed (busy excluded)
  std::string last_checkpoint_error;
};

class job_store {
 public:
  // Opens or creates the database (tables created if missing; older schema versions migrated;
  // the lock taken).
  static result<std::unique_ptr<job_store>> open(const std::string& path,
                                                 const store_options& options = {});
  ~job_store();

  void begin();
  // Commits the transaction begin() opened. On failure the transaction is rolled back and
  // store_error thrown: nothing of it was kept.
  void commit();
  // Ends the transaction begin() opened without keeping anything (after a store_error thrown by
  // a statement inside it). Does nothing when no transaction is open.
  void rollback();

  // Inserts a queued job; sets row.id. Records the "queued" event. row.request_key, when not
  // empty, must not be used already by row.owner (check job_by_request_key first).
  uint64_t insert_job(job_row& row, int64_t now_ms);
  // The job `owner` submitted with `request_key`, if any.
  std::optional<uint64_t> job_by_request_key(const std::string& owner,
                                             const std::string& request_key);

  // Changes of state, each also recorded as an event (event name, attempt, node, detail):
  // assigned: attempts = attempt, node = node, state running   (event "assigned")
  void job_assigned(uint64_t id, uint32_t attempt, const std::string& node, int64_t now_ms);
  // started: started_ms, n_prompt                               (event "started", detail = the
  // node's word on its start, "model load 1.03 s", or "")
  void job_started(uint64_t id, uint32_t attempt, const std::string& node, uint32_t n_prompt,
                   int64_t now_ms, const std::string& detail = "");
  // requeued: state queued, output deleted, n_gen and output_bytes 0 (event "requeued",
  // detail = why)
  void job_requeued(uint64_t id, uint32_t attempt, const std::string& node, const std::string& why,
                    int64_t now_ms);
  // finished: state (completed/failed/cancelled), finished_ms, counts, stop reason, error. The
  // output must have been appended before (append_output); it is kept as it is.
  void job_finished(uint64_t id, uint32_t attempt, const std::string& node, wire::job_state state,
                    const std::string& stop_reason, const std::string& error, uint32_t n_prompt,
                    uint32_t n_gen, int64_t now_ms);

  // An event that changes nothing of the job's row (event name, attempt, node, detail).
  void job_noted(uint64_t id, uint32_t attempt, const std::string& node, const std::string& event,
                 const std::string& detail, int64_t now_ms);

  // Appends `text` to the running job's output at byte `offset` (which must equal its stored
  // output_bytes: chunks are never rewritten) and sets its n_gen. Only the new bytes are
  // written; the job's row and earlier chunks are not rewritten. Ignored for a job that is not
  // running (a batch arriving after the job's final).
  void append_output(uint64_t id, uint64_t offset, std::string_view text, uint32_t n_gen);
  // Bytes [offset, offset + max_bytes) of the job's stored output (fewer at its end; "" past it).
  std::string read_output(uint64_t id, uint64_t offset, uint64_t max_bytes);

  std::optional<job_row> job(uint64_t id);  // with prompt and messages
  std::vector<wire::job_event> job_events(uint64_t id);
  // Summaries only: prompt and messages are not read (nor output), so a listing of jobs with
  // large prompts stays cheap.
  std::vector<job_row> jobs(const job_filter& f);
  // Jobs in state queued or running, oldest first, with prompt and messages: what a restarted
  // broker must take over.
  std::vector<job_row> unfinished_jobs();
  uint64_t job_count();

  // Deletes at most `max_jobs` finished jobs that `r` selects (with their messages, events and
  // output), oldest first, and returns how many it deleted; call again while it returns
  // max_jobs, so that pruning a large history never holds one long transaction. Then frees up to
  // a bounded number of pages back to the file system (incremental vacuum), so the file shrinks.
  uint64_t prune(const retention& r, int64_t now_ms, uint32_t max_jobs);

  // Nodes: upserted on hello and status changes, last_seen written at most every few seconds.
  void node_upsert(const wire::node_summary& n);
  void node_seen(const std::string& name, bool online, int64_t last_seen_ms);
  std::vector<wire::node_summary> nodes();
  // Removes a node, its devices and models, and the models only it advertised (known_models).
  void node_forget(const std::string& name);
  // Every model any node has ever advertised (so a model of an offline node is not "unknown").
  std::vector<std::string> known_models();

  // API keys (broker/api-keys.h), revoked ones included: the broker keeps them all in memory.
  void api_key_insert(const api_key_record& k);
  void api_key_revoke(const std::string& id, int64_t now_ms);
  void api_key_used(const std::string& id, int64_t now_ms);
  std::vector<api_key_record> api_keys();

  // Whether the last successful commit() changed anything (a turn may commit nothing).
  bool last_commit_wrote() const;

  store_stats stats() const;

 private:
  struct impl;
  explicit job_store(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace hearth::broker
