#include "broker/job-store-schema.h"

#include <cstdio>
#include <iterator>

namespace hearth::broker {
namespace {

// "HRTH" in the file header tells our database from another application's SQLite file;
// user_version is the layout below. A layout change bumps it and adds a step to `migrations`;
// open() upgrades older files in place and refuses newer ones.
constexpr int32_t hearth_application_id = 0x48525448;
constexpr int32_t hearth_schema_version = 8;

// uint64 values (seed, sizes) are stored as the int64 of the same bits.
// A job's row holds only small columns: the broker updates it many times a second per running
// job (state, n_gen, output_bytes), and SQLite writes a changed row whole, so the prompt lives in
// job_prompts and the output in job_output (appended chunks, never rewritten).
// The column order is the one a migrated version-2 file has (ALTER TABLE appends columns).
constexpr const char* schema_sql = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  model TEXT NOT NULL,
  priority INTEGER NOT NULL,
  state TEXT NOT NULL,
  node TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  finished_ms INTEGER NOT NULL,
  n_prompt INTEGER NOT NULL,
  n_gen INTEGER NOT NULL,
  stop_reason TEXT NOT NULL,
  error TEXT NOT NULL,
  max_tokens INTEGER NOT NULL,
  temperature REAL NOT NULL,
  top_k INTEGER NOT NULL,
  top_p REAL NOT NULL,
  min_p REAL NOT NULL,
  repeat_penalty REAL NOT NULL,
  repeat_last_n INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  stop TEXT NOT NULL,  -- each stop string as <byte length>:<bytes>, so any bytes survive
  owner TEXT NOT NULL DEFAULT '',  -- the submitting client's public key (Z85); '' without auth
  output_bytes INTEGER NOT NULL DEFAULT 0,  -- the latest attempt's output in job_output
  request_key TEXT NOT NULL DEFAULT '',  -- the submit's idempotency key; '' = none
  presence_penalty REAL NOT NULL DEFAULT 0,
  frequency_penalty REAL NOT NULL DEFAULT 0,
  chat_template TEXT NOT NULL DEFAULT '',  -- a chat job's template by name; '' = the model's
  enable_thinking INTEGER NOT NULL DEFAULT 1,  -- job_params.enable_thinking (thinking models)
  show_thinking INTEGER NOT NULL DEFAULT 0  -- job_params.show_thinking: the think block kept
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_model ON jobs(model);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, id);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_request_key ON jobs(owner, request_key)
  WHERE request_key <> '';
-- prune() walks finished jobs by age and by id without sorting the whole history. A job is
-- finished when it has a finished_ms; the predicate is a plain comparison because an IN list in
-- a partial index's WHERE makes every UPDATE of a job build temporary tables to evaluate it
-- (measured: 25 times slower turns).
CREATE INDEX IF NOT EXISTS jobs_finished_ms ON jobs(finished_ms) WHERE finished_ms > 0;
CREATE INDEX IF NOT EXISTS jobs_finished_id ON jobs(id) WHERE finished_ms > 0;
CREATE TABLE IF NOT EXISTS job_prompts (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
  prompt TEXT NOT NULL
);
-- The latest attempt's output: data holds bytes [byte_offset, byte_offset + length(data)).
-- BLOB, not TEXT: a chunk may end inside a UTF-8 character, and substr() counts BLOB bytes.
CREATE TABLE IF NOT EXISTS job_output (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  byte_offset INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (job_id, byte_offset)
);
CREATE TABLE IF NOT EXISTS job_messages (
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  idx INTEGER NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  name TEXT NOT NULL DEFAULT '',  -- chat_message's optional fields (issue 56)
  tool_call_id TEXT NOT NULL DEFAULT '',
  reasoning_content TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, idx)
);
-- An assistant message's tool calls: call idx of message message_idx of the job.
CREATE TABLE IF NOT EXISTS job_tool_calls (
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  message_idx INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  call_id TEXT NOT NULL,
  name TEXT NOT NULL,
  arguments TEXT NOT NULL,
  PRIMARY KEY (job_id, message_idx, idx)
) WITHOUT ROWID;
-- job_params.api (issue 56), one column per api_params field under its wire name, written once
-- at submit and only for a job that asks for any of it: its texts (tools, a JSON Schema, a
-- grammar) may be large, and the jobs row is rewritten many times a second while a job runs.
-- logit_bias: each entry as its int32 token and float32 bias, little-endian, 8 bytes.
CREATE TABLE IF NOT EXISTS job_api (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
  tools TEXT NOT NULL,
  tool_choice TEXT NOT NULL,
  parallel_tool_calls INTEGER NOT NULL,
  json_schema TEXT NOT NULL,
  grammar TEXT NOT NULL,
  template_kwargs TEXT NOT NULL,
  logprobs INTEGER NOT NULL,
  top_logprobs INTEGER NOT NULL,
  n INTEGER NOT NULL,
  logit_bias BLOB NOT NULL,
  events INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job_events (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  time_ms INTEGER NOT NULL,
  event TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  node TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_events_job ON job_events(job_id);
CREATE TABLE IF NOT EXISTS nodes (
  name TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  engine TEXT NOT NULL,
  online INTEGER NOT NULL,
  last_seen_ms INTEGER NOT NULL,
  slots INTEGER NOT NULL,
  cpu_model TEXT NOT NULL,
  cpu_threads INTEGER NOT NULL,
  memory_total INTEGER NOT NULL,
  memory_available INTEGER NOT NULL,
  key TEXT NOT NULL DEFAULT ''  -- the node's public key (Z85): its name is bound to it
);
CREATE TABLE IF NOT EXISTS node_gpus (
  node TEXT NOT NULL REFERENCES nodes(name),
  idx INTEGER NOT NULL,
  backend TEXT NOT NULL,
  name TEXT NOT NULL,
  memory_total INTEGER NOT NULL,
  memory_free INTEGER NOT NULL,
  PRIMARY KEY (node, idx)
);
CREATE TABLE IF NOT EXISTS node_models (
  node TEXT NOT NULL REFERENCES nodes(name),
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  architecture TEXT NOT NULL,
  quantization TEXT NOT NULL,
  size_bytes INTEGER NOT NULL,
  context_length INTEGER NOT NULL,
  loaded INTEGER NOT NULL,
  PRIMARY KEY (node, idx)
);
-- Every model name ever advertised: node_models holds only each node's latest list.
CREATE TABLE IF NOT EXISTS models_seen (name TEXT PRIMARY KEY) WITHOUT ROWID;
-- API keys of HTTP clients (broker/api-keys.h): the secret's SHA-256, never the secret.
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,  -- the first 12 hex digits of hash; jobs' owner is 'api:' || id
  name TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  revoked_ms INTEGER NOT NULL DEFAULT 0,  -- 0: in force
  last_used_ms INTEGER NOT NULL DEFAULT 0,
  role TEXT NOT NULL DEFAULT 'client'  -- 'client' or 'admin' (sees and cancels every job)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS api_keys_in_force ON api_keys(name) WHERE revoked_ms = 0;
)sql";

// migrations[v - 1] turns a version-v file into version v + 1 (columns added by ALTER TABLE land
// at the end of the row; every query names its columns, so the order does not matter).
constexpr const char* migrations[] = {
    // 1 -> 2: job owners and node keys (authentication).
    "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, id);"
    "ALTER TABLE nodes ADD COLUMN key TEXT NOT NULL DEFAULT '';",
    // 2 -> 3: prompts and output out of the job's row, output in 64 KiB chunks (so that a page
    // of it is read without loading all of it), idempotency keys.
    "ALTER TABLE jobs ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN request_key TEXT NOT NULL DEFAULT '';"
    "CREATE UNIQUE INDEX jobs_request_key ON jobs(owner, request_key) WHERE request_key <> '';"
    "CREATE INDEX jobs_finished_ms ON jobs(finished_ms) WHERE finished_ms > 0;"
    "CREATE INDEX jobs_finished_id ON jobs(id) WHERE finished_ms > 0;"
    "CREATE TABLE job_prompts (job_id INTEGER PRIMARY KEY REFERENCES jobs(id), "
    "  prompt TEXT NOT NULL);"
    "INSERT INTO job_prompts (job_id, prompt) SELECT id, prompt FROM jobs;"
    "CREATE TABLE job_output (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id), "
    "  byte_offset INTEGER NOT NULL, data BLOB NOT NULL, UNIQUE (job_id, byte_offset));"
    "WITH RECURSIVE piece(job_id, byte_offset, total) AS ("
    "  SELECT id, 0, length(CAST(output AS BLOB)) FROM jobs WHERE output <> ''"
    "  UNION ALL SELECT job_id, byte_offset + 65536, total FROM piece"
    "    WHERE byte_offset + 65536 < total)"
    "INSERT INTO job_output (job_id, byte_offset, data)"
    "  SELECT piece.job_id, piece.byte_offset,"
    "    substr(CAST(jobs.output AS BLOB), piece.byte_offset + 1, 65536)"
    "  FROM piece JOIN jobs ON jobs.id = piece.job_id ORDER BY piece.job_id, piece.byte_offset;"
    "UPDATE jobs SET output_bytes = length(CAST(output AS BLOB));"
    "ALTER TABLE jobs DROP COLUMN prompt;"
    "ALTER TABLE jobs DROP COLUMN output;",
    // 3 -> 4: API keys, and OpenAI's presence and frequency penalties among a job's parameters.
    "ALTER TABLE jobs ADD COLUMN presence_penalty REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN frequency_penalty REAL NOT NULL DEFAULT 0;"
    "CREATE TABLE api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, "
    "  prefix TEXT NOT NULL, created_ms INTEGER NOT NULL, "
    "  revoked_ms INTEGER NOT NULL DEFAULT 0, last_used_ms INTEGER NOT NULL DEFAULT 0) "
    "  WITHOUT ROWID;"
    "CREATE UNIQUE INDEX api_keys_in_force ON api_keys(name) WHERE revoked_ms = 0;",
    // 4 -> 5: a chat job's template by name.
    "ALTER TABLE jobs ADD COLUMN chat_template TEXT NOT NULL DEFAULT '';",
    // 5 -> 6: admin API keys.
    "ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'client';",
    // 6 -> 7: a thinking model's job parameters.
    "ALTER TABLE jobs ADD COLUMN enable_thinking INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN show_thinking INTEGER NOT NULL DEFAULT 0;",
    // 7 -> 8: tool calls, tool messages and the OpenAI-style API parameters (issue 56).
    "ALTER TABLE job_messages ADD COLUMN name TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE job_messages ADD COLUMN tool_call_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE job_messages ADD COLUMN reasoning_content TEXT NOT NULL DEFAULT '';"
    "CREATE TABLE job_tool_calls (job_id INTEGER NOT NULL REFERENCES jobs(id), "
    "  message_idx INTEGER NOT NULL, idx INTEGER NOT NULL, call_id TEXT NOT NULL, "
    "  name TEXT NOT NULL, arguments TEXT NOT NULL, PRIMARY KEY (job_id, message_idx, idx)) "
    "  WITHOUT ROWID;"
    "CREATE TABLE job_api (job_id INTEGER PRIMARY KEY REFERENCES jobs(id), tools TEXT NOT NULL, "
    "  tool_choice TEXT NOT NULL, parallel_tool_calls INTEGER NOT NULL, "
    "  json_schema TEXT NOT NULL, grammar TEXT NOT NULL, template_kwargs TEXT NOT NULL, "
    "  logprobs INTEGER NOT NULL, top_logprobs INTEGER NOT NULL, n INTEGER NOT NULL, "
    "  logit_bias BLOB NOT NULL, events INTEGER NOT NULL);",
};
static_assert(std::size(migrations) == hearth_schema_version - 1);

using sqlite::exec;
using sqlite::read_value;

// Runs `sql` in one transaction: on failure nothing of it is kept.
void exec_atomically(sqlite3* db, const std::string& sql) {
  sqlite::transaction t(db);
  exec(db, sql);
  t.commit();
}

}  // namespace

std::string store_schema_prepare(sqlite3* db, const store_options& options) {
  // Read before anything is written, so another application's file is left as it was.
  int64_t app_id = std::stoll(read_value(db, "PRAGMA application_id"));
  int64_t version = std::stoll(read_value(db, "PRAGMA user_version"));
  int64_t objects = std::stoll(read_value(db, "SELECT count(*) FROM sqlite_master"));
  bool fresh = app_id == 0 && version == 0 && objects == 0;
  if (!fresh) {
    if (app_id != hearth_application_id) {
      char hex[16];
      snprintf(hex, sizeof hex, "0x%08x", static_cast<uint32_t>(app_id));
      return app_id == 0 ? "not a hearth database (it has tables of another application)"
                         : std::string("not a hearth database (application_id ") + hex + ")";
    }
    if (version < 1 || version > hearth_schema_version) {
      return "hearth schema version " + std::to_string(version) + ", this broker reads versions " +
             "1 to " + std::to_string(hearth_schema_version);
    }
  }
  // Pages freed by prune() go back to the file system (incremental_vacuum). It can only be set
  // before the first table exists; an older file gets it from the VACUUM after its migration.
  if (fresh) exec(db, "PRAGMA auto_vacuum=INCREMENTAL");
  std::string mode = read_value(db, "PRAGMA journal_mode=WAL");
  if (mode != "wal" && mode != "memory") return "cannot use WAL mode (journal mode " + mode + ")";
  // FULL: each commit fsyncs the WAL before it returns. NORMAL: only checkpoints sync.
  exec(db, options.sync == store_options::durability::full ? "PRAGMA synchronous=FULL"
                                                           : "PRAGMA synchronous=NORMAL");
  exec(db, "PRAGMA journal_size_limit=" + std::to_string(options.wal_limit_bytes));
  // Checkpoints run on wal_checkpointer's thread, not inside the broker's commits.
  exec(db, "PRAGMA wal_autocheckpoint=0");
  // Temporary tables (an IN list, a sort) stay in memory: a temporary file can fail to be written
  // on a full disk, and the reload after a storage failure must still read the jobs.
  exec(db, "PRAGMA temp_store=MEMORY");
  const std::string set_version = "PRAGMA user_version=" + std::to_string(hearth_schema_version);
  if (fresh) {
    exec_atomically(db, schema_sql + ("PRAGMA application_id=" +
                                      std::to_string(hearth_application_id) + ";" + set_version));
  } else if (version < hearth_schema_version) {
    // A migration rebuilds tables, which foreign key checks would refuse halfway; the pragma
    // cannot change inside a transaction.
    exec(db, "PRAGMA foreign_keys=OFF");
    std::string steps;
    for (int64_t v = version; v < hearth_schema_version; ++v) steps += migrations[v - 1];
    exec_atomically(db, steps + set_version);
    if (read_value(db, "PRAGMA auto_vacuum") != "2") {
      exec(db, "PRAGMA auto_vacuum=INCREMENTAL");
      exec(db, "VACUUM");
    }
  }
  exec(db, "PRAGMA foreign_keys=ON");
  return "";
}

}  // namespace hearth::broker
