#include "broker/job-store.h"

#include <sqlite3.h>

#include <algorithm>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "broker/job-store-schema.h"
#include "broker/store-lock.h"
#include "broker/wal-checkpointer.h"

namespace hearth::broker {
namespace {

// The columns of a job's summary, in the order read_job() expects: everything but the prompt,
// the messages and the output, so that a listing reads only the jobs table's small rows.
constexpr const char* summary_columns =
    "id, model, priority, state, node, attempts, created_ms, started_ms, finished_ms, n_prompt, "
    "n_gen, output_bytes, stop_reason, error, max_tokens, temperature, top_k, top_p, min_p, "
    "repeat_penalty, repeat_last_n, seed, stop, owner, request_key, presence_penalty, "
    "frequency_penalty, chat_template, enable_thinking, show_thinking";

// Finished jobs, as the partial indexes jobs_finished_ms and jobs_finished_id select them
// (job-store-schema.cpp): every finished job has its finished_ms, no other job has one.
constexpr const char* finished = "finished_ms > 0";

// Pages prune() gives back to the file system per call (16 MiB of 4 KiB pages): enough to keep
// up with the jobs a batch deletes, small enough that one call never stalls the broker for long.
constexpr int prune_vacuum_pages = 4096;

std::string encode_stop(const std::vector<std::string>& stop) {
  std::string s;
  for (const auto& x : stop) s += std::to_string(x.size()) + ":" + x;
  return s;
}

std::vector<std::string> decode_stop(std::string_view s, uint64_t id) {
  std::vector<std::string> stop;
  while (!s.empty()) {
    size_t colon = s.find(':');
    size_t n = 0;
    bool ok = colon != std::string_view::npos && colon > 0;
    for (size_t i = 0; ok && i < colon; ++i) {
      ok = s[i] >= '0' && s[i] <= '9';
      n = n * 10 + static_cast<size_t>(s[i] - '0');
    }
    if (!ok || n > s.size() - colon - 1) {
      throw std::runtime_error("job " + std::to_string(id) +
                               ": malformed stop strings in database");
    }
    stop.emplace_back(s.substr(colon + 1, n));
    s.remove_prefix(colon + 1 + n);
  }
  return stop;
}

using sqlite::db_ptr;
using sqlite::query;

// api_params as the columns of job_api, by the same fields() list that drives the codec: the
// INSERT's columns are the fields' wire names, so a field added to api_params without its column
// (a migration) makes every store fail to open, in every test, instead of being silently lost.
// fields() is not const: the visitors that only read take the struct by non-const reference.
struct api_column_names {
  std::string names, marks;
  template <class T>
  void operator()(const char* name, T&) {
    names += std::string(", ") + name;
    marks += ", ?";
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
};

std::string api_insert_sql() {
  api_column_names c;
  wire::api_params defaults;
  defaults.fields(c);
  return "INSERT INTO job_api (job_id" + c.names + ") VALUES (?" + c.marks + ")";
}

std::string api_select_sql() {
  api_column_names c;
  wire::api_params defaults;
  defaults.fields(c);
  return "SELECT " + c.names.substr(2) + " FROM job_api WHERE job_id = ?";
}

std::string encode_logit_bias(const std::vector<wire::token_bias>& bias) {
  std::string b;
  b.reserve(bias.size() * 8);
  for (const auto& e : bias) {
    uint32_t bits = 0;
    std::memcpy(&bits, &e.bias, 4);
    for (uint32_t v : {static_cast<uint32_t>(e.token), bits})
      for (int i = 0; i < 4; ++i) b += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  return b;
}

std::vector<wire::token_bias> decode_logit_bias(std::string_view b, uint64_t id) {
  if (b.size() % 8 != 0) {
    throw std::runtime_error("job " + std::to_string(id) + ": malformed logit_bias in database");
  }
  auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
    return v;
  };
  std::vector<wire::token_bias> bias(b.size() / 8);
  for (size_t i = 0; i < bias.size(); ++i) {
    bias[i].token = static_cast<int32_t>(u32(8 * i));
    const uint32_t bits = u32(8 * i + 4);
    std::memcpy(&bias[i].bias, &bits, 4);
  }
  return bias;
}

// Binds each field after the job id, in fields() order. Holds the encoded blobs until the
// query has run (query binds without copying).
struct api_binder {
  query& q;
  std::vector<std::string> blobs;
  void operator()(const char*, std::string& v) { q.bind(std::string_view(v)); }
  void operator()(const char*, bool& v) { q.bind(int64_t(v)); }
  void operator()(const char*, int32_t& v) { q.bind(int64_t(v)); }
  void operator()(const char*, std::vector<wire::token_bias>& v) {
    q.bind_blob(blobs.emplace_back(encode_logit_bias(v)));
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
};

// Reads each field from its column of api_select_sql()'s row.
struct api_reader {
  query& q;
  uint64_t id;
  int col = 0;
  void operator()(const char*, std::string& v) { v = q.text(col++); }
  void operator()(const char*, bool& v) { v = q.i64(col++) != 0; }
  void operator()(const char*, int32_t& v) { v = static_cast<int32_t>(q.i64(col++)); }
  void operator()(const char*, std::vector<wire::token_bias>& v) {
    v = decode_logit_bias(q.blob(col++), id);
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
};

// Whether a job asks for any of api_params (else it has no job_api row and reads as the
// defaults): every scalar as its default instance has it, every text and list empty.
struct api_usage {
  std::vector<int64_t> scalars;
  bool any_content = false;
  void operator()(const char*, std::string& v) { any_content = any_content || !v.empty(); }
  void operator()(const char*, std::vector<wire::token_bias>& v) {
    any_content = any_content || !v.empty();
  }
  template <std::integral T>
  void operator()(const char*, T& v) {
    scalars.push_back(int64_t(v));
  }
  template <class T>
  void optional(const char* name, T& v) {
    (*this)(name, v);
  }
};

bool api_in_use(wire::api_params& api) {
  api_usage used, defaults;
  api.fields(used);
  wire::api_params d;
  d.fields(defaults);
  return used.any_content || used.scalars != defaults.scalars;
}

// The store's statements are prepared once and kept for its life.
class statement : public sqlite::statement {
 public:
  statement(sqlite3* db, std::string sql) : sqlite::statement(db, std::move(sql), true) {}
};

// Reads a row of select_jobs(), or of select_jobs_with_prompt() when `with_prompt`.
job_row read_job(query& q, bool with_prompt) {
  job_row r;
  r.id = static_cast<uint64_t>(q.i64(0));
  r.model = q.text(1);
  r.priority = static_cast<int32_t>(q.i64(2));
  std::string state = q.text(3);
  auto s = wire::job_state_from_name(state);
  if (!s) throw std::runtime_error("job " + std::to_string(r.id) + ": unknown state " + state);
  r.state = *s;
  r.node = q.text(4);
  r.attempts = static_cast<uint32_t>(q.i64(5));
  r.created_ms = q.i64(6);
  r.started_ms = q.i64(7);
  r.finished_ms = q.i64(8);
  r.n_prompt = static_cast<uint32_t>(q.i64(9));
  r.n_gen = static_cast<uint32_t>(q.i64(10));
  r.output_bytes = static_cast<uint64_t>(q.i64(11));
  r.stop_reason = q.text(12);
  r.error = q.text(13);
  r.params.max_tokens = static_cast<int32_t>(q.i64(14));
  r.params.temperature = static_cast<float>(q.real(15));
  r.params.top_k = static_cast<int32_t>(q.i64(16));
  r.params.top_p = static_cast<float>(q.real(17));
  r.params.min_p = static_cast<float>(q.real(18));
  r.params.repeat_penalty = static_cast<float>(q.real(19));
  r.params.repeat_last_n = static_cast<int32_t>(q.i64(20));
  r.params.seed = static_cast<uint64_t>(q.i64(21));
  r.params.stop = decode_stop(q.text(22), r.id);
  r.owner = q.text(23);
  r.request_key = q.text(24);
  r.params.presence_penalty = static_cast<float>(q.real(25));
  r.params.frequency_penalty = static_cast<float>(q.real(26));
  r.params.chat_template = q.text(27);
  r.params.enable_thinking = q.i64(28) != 0;
  r.params.show_thinking = q.i64(29) != 0;
  if (with_prompt) r.prompt = q.text(30);
  return r;
}

std::string select_jobs(const char* where_order) {
  return std::string("SELECT ") + summary_columns + " FROM jobs " + where_order;
}

// The summary and then the prompt (column 27).
std::string select_jobs_with_prompt(const char* where_order) {
  return std::string("SELECT ") + summary_columns +
         ", coalesce((SELECT prompt FROM job_prompts WHERE job_id = jobs.id), '') FROM jobs " +
         where_order;
}

// What to add to "cannot open" when the database's folder is missing (a common typo in --db).
std::string missing_directory_note(const std::string& path) {
  std::error_code ec;
  auto dir = std::filesystem::absolute(path, ec).parent_path();
  if (!ec && !std::filesystem::is_directory(dir, ec)) {
    return " (directory " + dir.string() + " does not exist)";
  }
  return "";
}

uint64_t file_bytes(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

int64_t clamp_i64(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
}

}  // namespace

struct job_store::impl {
  // What the transaction begin() opened changed (commit() tells whether it wrote anything).
  sqlite3_int64 changes_at_begin = 0;
  bool last_commit_wrote = false;
  impl(std::optional<store_lock> l, sqlite3* conn, std::string file)
      : lock(std::move(l)),
        db(conn),
        path(std::move(file)),
        begin(conn, "BEGIN IMMEDIATE"),
        commit(conn, "COMMIT"),
        rollback(conn, "ROLLBACK"),
        job_insert(conn,
                   "INSERT INTO jobs (model, priority, state, node, attempts, created_ms, "
                   "started_ms, finished_ms, n_prompt, n_gen, output_bytes, stop_reason, error, "
                   "max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, "
                   "seed, stop, owner, request_key, presence_penalty, frequency_penalty, "
                   "chat_template, enable_thinking, show_thinking) VALUES "
                   "(?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                   "?, ?, ?, ?, ?, ?)"),
        prompt_insert(conn, "INSERT INTO job_prompts (job_id, prompt) VALUES (?, ?)"),
        message_insert(conn,
                       "INSERT INTO job_messages (job_id, idx, role, content, name, tool_call_id, "
                       "reasoning_content) VALUES (?, ?, ?, ?, ?, ?, ?)"),
        tool_call_insert(conn,
                         "INSERT INTO job_tool_calls (job_id, message_idx, idx, call_id, name, "
                         "arguments) VALUES (?, ?, ?, ?, ?, ?)"),
        api_insert(conn, api_insert_sql()),
        event_insert(conn,
                     "INSERT INTO job_events (job_id, time_ms, event, attempt, node, detail) "
                     "VALUES (?, ?, ?, ?, ?, ?)"),
        request_key_select(conn,
                           "SELECT id FROM jobs WHERE owner = ? AND request_key = ? AND "
                           "request_key <> ''"),  // the last term lets the partial index serve
        job_assigned(conn,
                     "UPDATE jobs SET state = 'running', attempts = ?, node = ? WHERE id = ?"),
        job_started(conn, "UPDATE jobs SET started_ms = ?, n_prompt = ? WHERE id = ?"),
        job_requeued(conn,
                     "UPDATE jobs SET state = 'queued', n_gen = 0, output_bytes = 0 WHERE id = ?"),
        // A finish without a node (a queued job cancelled) keeps the latest attempt's node.
        job_finished(conn,
                     "UPDATE jobs SET state = ?1, finished_ms = ?2, n_prompt = ?3, n_gen = ?4, "
                     "stop_reason = ?5, error = ?6, "
                     "node = CASE WHEN ?7 = '' THEN node ELSE ?7 END WHERE id = ?8"),
        // Only a running job at the expected offset grows: a batch arriving after the job's
        // final (or after a requeue) must not change the output.
        output_grow(conn,
                    "UPDATE jobs SET output_bytes = output_bytes + ?1, n_gen = ?2 "
                    "WHERE id = ?3 AND state = 'running' AND output_bytes = ?4"),
        output_state(conn, "SELECT state, output_bytes FROM jobs WHERE id = ?"),
        output_insert(conn, "INSERT INTO job_output (job_id, byte_offset, data) VALUES (?, ?, ?)"),
        // The chunk holding byte ?2 and those after it, up to byte ?2 + ?3.
        output_select(conn,
                      "SELECT byte_offset, data FROM job_output WHERE job_id = ?1 AND "
                      "byte_offset >= coalesce((SELECT max(byte_offset) FROM job_output "
                      "WHERE job_id = ?1 AND byte_offset <= ?2), 0) AND byte_offset < ?2 + ?3 "
                      "ORDER BY byte_offset"),
        job_select(conn, select_jobs_with_prompt("WHERE id = ?")),
        messages_select(conn,
                        "SELECT role, content, name, tool_call_id, reasoning_content FROM "
                        "job_messages WHERE job_id = ? ORDER BY idx"),
        tool_calls_select(conn,
                          "SELECT message_idx, call_id, name, arguments FROM job_tool_calls "
                          "WHERE job_id = ? ORDER BY message_idx, idx"),
        api_select(conn, api_select_sql()),
        events_select(conn,
                      "SELECT time_ms, event, attempt, node, detail FROM job_events "
                      "WHERE job_id = ? ORDER BY id"),
        jobs_any(conn, select_jobs("ORDER BY id DESC LIMIT ?")),
        jobs_state(conn, select_jobs("WHERE state = ? ORDER BY id DESC LIMIT ?")),
        jobs_model(conn, select_jobs("WHERE model = ? ORDER BY id DESC LIMIT ?")),
        jobs_state_model(conn,
                         select_jobs("WHERE state = ? AND model = ? ORDER BY id DESC LIMIT ?")),
        // One client's jobs (index jobs_owner), the other filters applied to those.
        jobs_owner(conn, select_jobs("WHERE owner = ?1 AND (?2 IS NULL OR state = ?2) AND "
                                     "(?3 IS NULL OR model = ?3) ORDER BY id DESC LIMIT ?4")),
        jobs_unfinished(
            conn, select_jobs_with_prompt("WHERE state IN ('queued', 'running') ORDER BY id")),
        job_count(conn, "SELECT count(*) FROM jobs"),
        // INDEXED BY: the planner, without statistics, would rather use jobs_state and sort
        // every finished job on each call.
        prune_by_age(conn, std::string("SELECT id FROM jobs INDEXED BY jobs_finished_ms WHERE ") +
                               finished + " AND finished_ms < ? ORDER BY finished_ms LIMIT ?"),
        // Finished jobs older than the (?1 + 1)th newest one.
        prune_by_count(
            conn, std::string("SELECT id FROM jobs INDEXED BY jobs_finished_id WHERE ") + finished +
                      " AND id < (SELECT id FROM jobs INDEXED BY jobs_finished_id "
                      "WHERE " +
                      finished + " ORDER BY id DESC LIMIT 1 OFFSET ?1) ORDER BY id LIMIT ?2"),
        prompt_delete(conn, "DELETE FROM job_prompts WHERE job_id = ?"),
        output_delete(conn, "DELETE FROM job_output WHERE job_id = ?"),
        messages_delete(conn, "DELETE FROM job_messages WHERE job_id = ?"),
        tool_calls_delete(conn, "DELETE FROM job_tool_calls WHERE job_id = ?"),
        api_delete(conn, "DELETE FROM job_api WHERE job_id = ?"),
        events_delete(conn, "DELETE FROM job_events WHERE job_id = ?"),
        job_delete(conn, "DELETE FROM jobs WHERE id = ?"),
        incremental_vacuum(conn,
                           "PRAGMA incremental_vacuum(" + std::to_string(prune_vacuum_pages) + ")"),
        node_upsert(conn,
                    "INSERT INTO nodes (name, hostname, engine, online, last_seen_ms, slots, "
                    "cpu_model, cpu_threads, memory_total, memory_available, key) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "hostname = excluded.hostname, engine = excluded.engine, "
                    "online = excluded.online, last_seen_ms = excluded.last_seen_ms, "
                    "slots = excluded.slots, cpu_model = excluded.cpu_model, "
                    "cpu_threads = excluded.cpu_threads, memory_total = excluded.memory_total, "
                    "memory_available = excluded.memory_available, key = excluded.key"),
        node_delete(conn, "DELETE FROM nodes WHERE name = ?"),
        // The forgotten node's models that no other node advertises are no longer known.
        models_seen_prune(conn,
                          "DELETE FROM models_seen WHERE name IN (SELECT name FROM node_models "
                          "WHERE node = ?1) AND name NOT IN (SELECT name FROM node_models "
                          "WHERE node <> ?1)"),
        node_gpus_delete(conn, "DELETE FROM node_gpus WHERE node = ?"),
        node_models_delete(conn, "DELETE FROM node_models WHERE node = ?"),
        node_gpu_insert(conn,
                        "INSERT INTO node_gpus (node, idx, backend, name, memory_total, "
                        "memory_free) VALUES (?, ?, ?, ?, ?, ?)"),
        node_model_insert(conn,
                          "INSERT INTO node_models (node, idx, name, architecture, quantization, "
                          "size_bytes, context_length, loaded) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
        model_seen_insert(conn, "INSERT OR IGNORE INTO models_seen (name) VALUES (?)"),
        node_seen(conn, "UPDATE nodes SET online = ?, last_seen_ms = ? WHERE name = ?"),
        nodes_select(conn,
                     "SELECT name, hostname, engine, online, last_seen_ms, slots, cpu_model, "
                     "cpu_threads, memory_total, memory_available, key FROM nodes ORDER BY name"),
        node_gpus_select(conn,
                         "SELECT backend, name, memory_total, memory_free FROM node_gpus "
                         "WHERE node = ? ORDER BY idx"),
        node_models_select(conn,
                           "SELECT name, architecture, quantization, size_bytes, context_length, "
                           "loaded FROM node_models WHERE node = ? ORDER BY idx"),
        models_seen_select(conn, "SELECT name FROM models_seen ORDER BY name"),
        api_key_insert(conn,
                       "INSERT INTO api_keys (id, name, hash, prefix, created_ms, revoked_ms, "
                       "last_used_ms, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
        api_key_revoke(conn, "UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms = 0"),
        api_key_used(conn, "UPDATE api_keys SET last_used_ms = ? WHERE id = ?"),
        api_keys_select(conn,
                        "SELECT id, name, hash, prefix, created_ms, revoked_ms, last_used_ms, "
                        "role FROM api_keys") {}

  // The hook must not outlive the checkpointer it calls.
  ~impl() { sqlite3_wal_hook(db.get(), nullptr, nullptr); }

  // Declared first so that the lock is released after the database is closed.
  std::optional<store_lock> lock;
  // Declared before the statements so that it is closed after every one is finalized.
  db_ptr db;
  std::string path;
  statement begin, commit, rollback;
  statement job_insert, prompt_insert, message_insert, tool_call_insert, api_insert, event_insert,
      request_key_select;
  statement job_assigned, job_started, job_requeued, job_finished;
  statement output_grow, output_state, output_insert, output_select;
  statement job_select, messages_select, tool_calls_select, api_select, events_select;
  statement jobs_any, jobs_state, jobs_model, jobs_state_model, jobs_owner, jobs_unfinished;
  statement job_count;
  statement prune_by_age, prune_by_count, prompt_delete, output_delete, messages_delete,
      tool_calls_delete, api_delete, events_delete, job_delete;
  statement incremental_vacuum;
  statement node_upsert, node_delete, models_seen_prune;
  statement node_gpus_delete, node_models_delete, node_gpu_insert, node_model_insert;
  statement model_seen_insert, node_seen, nodes_select, node_gpus_select, node_models_select;
  statement models_seen_select;
  statement api_key_insert, api_key_revoke, api_key_used, api_keys_select;
  // Declared last so that its connection closes first and the broker's connection, closing
  // last, checkpoints and removes the WAL.
  std::unique_ptr<wal_checkpointer> checkpointer;

  // sqlite3_wal_hook: after every commit of this connection (the write lock already released).
  static int on_commit(void* self, sqlite3* db, const char*, int wal_frames) {
    static_cast<impl*>(self)->checkpointer->committed(db, wal_frames);
    return SQLITE_OK;
  }

  void event(uint64_t id, int64_t now_ms, std::string_view name, uint32_t attempt,
             std::string_view node, std::string_view detail) {
    query q(event_insert);
    q.bind(id).bind(now_ms).bind(name).bind(attempt).bind(node).bind(detail).run();
  }

  // The broker only reports changes of jobs it knows; anything else is a bug worth stopping for.
  void expect_changed(const char* what, uint64_t id) {
    if (sqlite3_changes(db.get()) == 0) {
      throw std::runtime_error(std::string(what) + ": no job " + std::to_string(id));
    }
  }

  // Makes a change of several statements atomic when the caller has not called begin(), which is
  // also much faster than one implicit transaction per statement. Inside begin() it does nothing.
  class write_scope {
   public:
    explicit write_scope(impl& s) : s_(s), own_(sqlite3_get_autocommit(s.db.get()) != 0) {
      if (own_) query(s_.begin).run();
    }
    ~write_scope() {
      if (own_ && sqlite3_get_autocommit(s_.db.get()) == 0) {
        sqlite3_exec(s_.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      }
    }
    void done() {
      if (own_) query(s_.commit).run();
    }

   private:
    impl& s_;
    bool own_;
  };

  std::vector<job_row> collect(query& q, bool with_prompt) {
    std::vector<job_row> rows;
    while (q.next()) rows.push_back(read_job(q, with_prompt));
    return rows;
  }

  // The job's messages with their tool calls, and its api params: what it was submitted with
  // besides the prompt and the jobs row.
  void fill_request(job_row& r) {
    {
      query q(messages_select);
      q.bind(r.id);
      while (q.next()) {
        wire::chat_message& m = r.messages.emplace_back();
        m.role = q.text(0);
        m.content = q.text(1);
        m.name = q.text(2);
        m.tool_call_id = q.text(3);
        m.reasoning_content = q.text(4);
      }
    }
    {
      query q(tool_calls_select);
      q.bind(r.id);
      while (q.next()) {
        const int64_t m = q.i64(0);
        if (m < 0 || static_cast<uint64_t>(m) >= r.messages.size()) {
          throw std::runtime_error("job " + std::to_string(r.id) +
                                   ": a tool call of a message it does not have in database");
        }
        r.messages[size_t(m)].tool_calls.push_back({q.text(1), q.text(2), q.text(3)});
      }
    }
    query q(api_select);
    q.bind(r.id);
    if (q.next()) {
      api_reader reader{q, r.id};
      r.params.api.fields(reader);
    }
  }
};

result<std::unique_ptr<job_store>> job_store::open(const std::string& path,
                                                   const store_options& options) {
  // Taken before SQLite touches the file, so that a second broker changes nothing (no
  // migration, no recovery) in the first one's database.
  std::optional<store_lock> lock;
  const bool on_disk = !path.empty() && path != ":memory:";
  if (on_disk) {
    auto l = store_lock::take(path);
    if (!l) return error{l.message() + missing_directory_note(path)};
    lock.emplace(std::move(l).value());
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  db_ptr db(raw);
  if (rc != SQLITE_OK) {
    std::string why = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    return error{path + ": cannot open the job database: " + why + missing_directory_note(path)};
  }
  try {
    sqlite3_extended_result_codes(db.get(), 1);
    sqlite3_busy_timeout(db.get(), 5000);
    if (std::string why = store_schema_prepare(db.get(), options); !why.empty()) {
      return error{path + ": " + why};
    }
    auto p = std::make_unique<impl>(std::move(lock), db.release(), path);
    if (on_disk) {
      wal_checkpointer::settings s;
      s.full_sync = options.sync == store_options::durability::full;
      s.wal_limit_bytes = options.wal_limit_bytes;
      p->checkpointer = std::make_unique<wal_checkpointer>(path, s);
      sqlite3_wal_hook(p->db.get(), &impl::on_commit, p.get());
    }
    return std::unique_ptr<job_store>(new job_store(std::move(p)));
  } catch (const std::exception& e) {
    return error{path + ": " + e.what()};
  }
}

job_store::job_store(std::unique_ptr<impl> p) : p_(std::move(p)) {}
job_store::~job_store() = default;

void job_store::begin() {
  query(p_->begin).run();
  p_->changes_at_begin = sqlite3_total_changes64(p_->db.get());
}

void job_store::commit() {
  try {
    const bool wrote = sqlite3_total_changes64(p_->db.get()) != p_->changes_at_begin;
    query(p_->commit).run();
    p_->last_commit_wrote = wrote;
  } catch (...) {
    // A failed COMMIT (I/O, disk full) may leave the transaction open; end it so that nothing
    // of this turn is half-kept and the next begin() starts clean.
    rollback();
    throw;
  }
}

void job_store::rollback() {
  // SQLite rolls some failures back by itself (a full disk, an I/O error); then there is
  // nothing left to end.
  if (sqlite3_get_autocommit(p_->db.get()) == 0) query(p_->rollback).run();
}

uint64_t job_store::insert_job(job_row& row, int64_t now_ms) {
  impl::write_scope w(*p_);
  const auto& pr = row.params;
  std::string stop = encode_stop(pr.stop);
  {
    query q(p_->job_insert);
    q.bind(row.model).bind(row.priority).bind(row.node).bind(row.attempts).bind(now_ms);
    q.bind(row.started_ms).bind(row.finished_ms).bind(row.n_prompt).bind(row.n_gen);
    q.bind(row.stop_reason).bind(row.error).bind(pr.max_tokens).bind(pr.temperature);
    q.bind(pr.top_k).bind(pr.top_p).bind(pr.min_p);
    q.bind(pr.repeat_penalty).bind(pr.repeat_last_n).bind(pr.seed).bind(stop);
    q.bind(row.owner).bind(row.request_key).bind(pr.presence_penalty);
    q.bind(pr.frequency_penalty).bind(pr.chat_template).bind(pr.enable_thinking);
    q.bind(pr.show_thinking).run();
  }
  uint64_t id = static_cast<uint64_t>(sqlite3_last_insert_rowid(p_->db.get()));
  query(p_->prompt_insert).bind(id).bind(row.prompt).run();
  for (size_t i = 0; i < row.messages.size(); ++i) {
    const auto& m = row.messages[i];
    query(p_->message_insert)
        .bind(id)
        .bind(i)
        .bind(m.role)
        .bind(m.content)
        .bind(m.name)
        .bind(m.tool_call_id)
        .bind(m.reasoning_content)
        .run();
    for (size_t c = 0; c < m.tool_calls.size(); ++c) {
      const wire::tool_call& call = m.tool_calls[c];
      query(p_->tool_call_insert)
          .bind(id)
          .bind(i)
          .bind(c)
          .bind(call.id)
          .bind(call.name)
          .bind(call.arguments)
          .run();
    }
  }
  if (api_in_use(row.params.api)) {
    query q(p_->api_insert);
    q.bind(id);
    api_binder binder{q, {}};
    row.params.api.fields(binder);
    q.run();
  }
  p_->event(id, now_ms, "queued", 0, "", "");
  w.done();
  row.id = id;
  row.state = wire::job_state::queued;
  row.created_ms = now_ms;
  row.output_bytes = 0;
  return id;
}

std::optional<uint64_t> job_store::job_by_request_key(const std::string& owner,
                                                      const std::string& request_key) {
  if (request_key.empty()) return std::nullopt;
  query q(p_->request_key_select);
  q.bind(owner).bind(request_key);
  if (!q.next()) return std::nullopt;
  return static_cast<uint64_t>(q.i64(0));
}

void job_store::job_assigned(uint64_t id, uint32_t attempt, const std::string& node,
                             int64_t now_ms) {
  impl::write_scope w(*p_);
  query(p_->job_assigned).bind(attempt).bind(node).bind(id).run();
  p_->expect_changed("job_assigned", id);
  p_->event(id, now_ms, "assigned", attempt, node, "");
  w.done();
}

void job_store::job_started(uint64_t id, uint32_t attempt, const std::string& node,
                            uint32_t n_prompt, int64_t now_ms, const std::string& detail) {
  impl::write_scope w(*p_);
  query(p_->job_started).bind(now_ms).bind(n_prompt).bind(id).run();
  p_->expect_changed("job_started", id);
  p_->event(id, now_ms, "started", attempt, node, detail);
  w.done();
}

void job_store::job_requeued(uint64_t id, uint32_t attempt, const std::string& node,
                             const std::string& why, int64_t now_ms) {
  impl::write_scope w(*p_);
  query(p_->job_requeued).bind(id).run();
  p_->expect_changed("job_requeued", id);
  query(p_->output_delete).bind(id).run();
  p_->event(id, now_ms, "requeued", attempt, node, why);
  w.done();
}

void job_store::job_noted(uint64_t id, uint32_t attempt, const std::string& node,
                          const std::string& event, const std::string& detail, int64_t now_ms) {
  impl::write_scope w(*p_);
  p_->event(id, now_ms, event, attempt, node, detail);
  w.done();
}

void job_store::job_finished(uint64_t id, uint32_t attempt, const std::string& node,
                             wire::job_state state, const std::string& stop_reason,
                             const std::string& error, uint32_t n_prompt, uint32_t n_gen,
                             int64_t now_ms) {
  if (!wire::job_state_is_final(state)) {
    throw std::invalid_argument("job_finished: " + std::string(wire::job_state_name(state)) +
                                " is not a final state");
  }
  std::string_view name = wire::job_state_name(state);
  impl::write_scope w(*p_);
  query q(p_->job_finished);
  q.bind(name).bind(now_ms).bind(n_prompt).bind(n_gen).bind(stop_reason).bind(error);
  q.bind(node).bind(id).run();
  p_->expect_changed("job_finished", id);
  p_->event(id, now_ms, name, attempt, node, error.empty() ? stop_reason : error);
  w.done();
}

void job_store::append_output(uint64_t id, uint64_t offset, std::string_view text, uint32_t n_gen) {
  impl::write_scope w(*p_);
  query(p_->output_grow).bind(text.size()).bind(n_gen).bind(id).bind(offset).run();
  if (sqlite3_changes(p_->db.get()) == 0) {
    query q(p_->output_state);
    q.bind(id);
    if (!q.next()) throw std::runtime_error("append_output: no job " + std::to_string(id));
    if (q.text(0) != "running") return;  // a batch after the job's final: ignored
    throw std::invalid_argument("append_output: job " + std::to_string(id) + " has " +
                                std::to_string(q.i64(1)) + " bytes of output, not " +
                                std::to_string(offset));
  }
  if (!text.empty()) query(p_->output_insert).bind(id).bind(offset).bind_blob(text).run();
  w.done();
}

std::string job_store::read_output(uint64_t id, uint64_t offset, uint64_t max_bytes) {
  std::string out;
  const int64_t from = clamp_i64(offset);
  const int64_t n = std::min(clamp_i64(max_bytes), std::numeric_limits<int64_t>::max() - from);
  query q(p_->output_select);
  q.bind(id).bind(from).bind(n);
  while (q.next()) {
    const int64_t at = q.i64(0);
    std::string_view data = q.blob(1);
    // The first chunk may start before `from`, the last end after from + n.
    const int64_t skip = std::max<int64_t>(from - at, 0);
    if (skip >= static_cast<int64_t>(data.size())) continue;
    data.remove_prefix(static_cast<size_t>(skip));
    const int64_t room = n - static_cast<int64_t>(out.size());
    out.append(data.substr(0, static_cast<size_t>(std::min<int64_t>(room, data.size()))));
  }
  return out;
}

std::optional<job_row> job_store::job(uint64_t id) {
  std::optional<job_row> r;
  {
    query q(p_->job_select);
    q.bind(id);
    if (!q.next()) return std::nullopt;
    r = read_job(q, true);
  }
  p_->fill_request(*r);
  return r;
}

std::vector<wire::job_event> job_store::job_events(uint64_t id) {
  std::vector<wire::job_event> events;
  query q(p_->events_select);
  q.bind(id);
  while (q.next()) {
    events.push_back({q.i64(0), q.text(1), static_cast<uint32_t>(q.i64(2)), q.text(3), q.text(4)});
  }
  return events;
}

std::vector<job_row> job_store::jobs(const job_filter& f) {
  std::string_view state = f.state ? wire::job_state_name(*f.state) : std::string_view();
  if (f.owner) {
    query q(p_->jobs_owner);
    q.bind(*f.owner);
    if (f.state) {
      q.bind(state);
    } else {
      q.bind_null();
    }
    if (!f.model.empty()) {
      q.bind(f.model);
    } else {
      q.bind_null();
    }
    q.bind(f.limit);
    return p_->collect(q, false);
  }
  bool by_model = !f.model.empty();
  statement& st = f.state ? (by_model ? p_->jobs_state_model : p_->jobs_state)
                          : (by_model ? p_->jobs_model : p_->jobs_any);
  query q(st);
  if (f.state) q.bind(state);
  if (by_model) q.bind(f.model);
  q.bind(f.limit);
  return p_->collect(q, false);
}

std::vector<job_row> job_store::unfinished_jobs() {
  std::vector<job_row> rows;
  {
    query q(p_->jobs_unfinished);
    rows = p_->collect(q, true);
  }
  for (auto& r : rows) p_->fill_request(r);
  return rows;
}

uint64_t job_store::job_count() {
  query q(p_->job_count);
  return q.next() ? static_cast<uint64_t>(q.i64(0)) : 0;
}

uint64_t job_store::prune(const retention& r, int64_t now_ms, uint32_t max_jobs) {
  impl::write_scope w(*p_);
  // Each rule oldest first by its own measure; a job both select is deleted once.
  std::vector<uint64_t> ids;
  auto select = [&](statement& st, int64_t arg) {
    query q(st);
    q.bind(arg).bind(max_jobs);
    while (ids.size() < max_jobs && q.next()) {
      const auto id = static_cast<uint64_t>(q.i64(0));
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  };
  if (r.max_age_ms != 0) {
    const int64_t age = clamp_i64(r.max_age_ms);
    select(p_->prune_by_age, now_ms < std::numeric_limits<int64_t>::min() + age
                                 ? std::numeric_limits<int64_t>::min()
                                 : now_ms - age);
  }
  if (r.keep_last != 0) select(p_->prune_by_count, clamp_i64(r.keep_last - 1));
  // Children first: the foreign keys refer to the job.
  for (uint64_t id : ids) {
    for (statement* st :
         {&p_->tool_calls_delete, &p_->messages_delete, &p_->api_delete, &p_->events_delete,
          &p_->prompt_delete, &p_->output_delete, &p_->job_delete}) {
      query(*st).bind(id).run();
    }
  }
  // Also after a call that deleted nothing: it continues what earlier calls left on the
  // free list.
  query(p_->incremental_vacuum).run();
  w.done();
  return ids.size();
}

void job_store::node_upsert(const wire::node_summary& n) {
  impl::write_scope w(*p_);
  const auto& hw = n.hardware;
  {
    query q(p_->node_upsert);
    q.bind(n.name).bind(n.hostname).bind(n.engine).bind(n.online).bind(n.last_seen_ms);
    q.bind(n.slots).bind(hw.cpu_model).bind(hw.cpu_threads).bind(hw.memory_total);
    q.bind(hw.memory_available).bind(n.key).run();
  }
  query(p_->node_gpus_delete).bind(n.name).run();
  query(p_->node_models_delete).bind(n.name).run();
  for (size_t i = 0; i < hw.gpus.size(); ++i) {
    const auto& g = hw.gpus[i];
    query q(p_->node_gpu_insert);
    q.bind(n.name).bind(i).bind(g.backend).bind(g.name).bind(g.memory_total);
    q.bind(g.memory_free).run();
  }
  for (size_t i = 0; i < n.models.size(); ++i) {
    const auto& m = n.models[i];
    {
      query q(p_->node_model_insert);
      q.bind(n.name).bind(i).bind(m.name).bind(m.architecture).bind(m.quantization);
      q.bind(m.size_bytes).bind(m.context_length).bind(m.loaded).run();
    }
    query(p_->model_seen_insert).bind(m.name).run();
  }
  w.done();
}

void job_store::node_seen(const std::string& name, bool online, int64_t last_seen_ms) {
  query(p_->node_seen).bind(online).bind(last_seen_ms).bind(name).run();
}

std::vector<wire::node_summary> job_store::nodes() {
  std::vector<wire::node_summary> nodes;
  {
    query q(p_->nodes_select);
    while (q.next()) {
      wire::node_summary n;
      n.name = q.text(0);
      n.hostname = q.text(1);
      n.engine = q.text(2);
      n.online = q.i64(3) != 0;
      n.last_seen_ms = q.i64(4);
      n.slots = static_cast<uint32_t>(q.i64(5));
      n.hardware.cpu_model = q.text(6);
      n.hardware.cpu_threads = static_cast<uint32_t>(q.i64(7));
      n.hardware.memory_total = static_cast<uint64_t>(q.i64(8));
      n.hardware.memory_available = static_cast<uint64_t>(q.i64(9));
      n.key = q.text(10);
      nodes.push_back(std::move(n));
    }
  }
  for (auto& n : nodes) {
    {
      query q(p_->node_gpus_select);
      q.bind(n.name);
      while (q.next()) {
        n.hardware.gpus.push_back({q.text(0), q.text(1), static_cast<uint64_t>(q.i64(2)),
                                   static_cast<uint64_t>(q.i64(3))});
      }
    }
    query q(p_->node_models_select);
    q.bind(n.name);
    while (q.next()) {
      n.models.push_back({q.text(0), q.text(1), q.text(2), static_cast<uint64_t>(q.i64(3)),
                          static_cast<uint32_t>(q.i64(4)), q.i64(5) != 0});
    }
  }
  return nodes;
}

void job_store::node_forget(const std::string& name) {
  impl::write_scope w(*p_);
  query(p_->models_seen_prune).bind(name).run();
  query(p_->node_gpus_delete).bind(name).run();
  query(p_->node_models_delete).bind(name).run();
  query(p_->node_delete).bind(name).run();
  w.done();
}

std::vector<std::string> job_store::known_models() {
  std::vector<std::string> names;
  query q(p_->models_seen_select);
  while (q.next()) names.push_back(q.text(0));
  return names;
}

void job_store::api_key_insert(const api_key_record& k) {
  query q(p_->api_key_insert);
  q.bind(k.id).bind(k.name).bind(k.hash).bind(k.prefix).bind(k.created_ms).bind(k.revoked_ms);
  q.bind(k.last_used_ms).bind(k.admin ? "admin" : "client").run();
}

void job_store::api_key_revoke(const std::string& id, int64_t now_ms) {
  query(p_->api_key_revoke).bind(now_ms).bind(id).run();
}

void job_store::api_key_used(const std::string& id, int64_t now_ms) {
  query(p_->api_key_used).bind(now_ms).bind(id).run();
}

std::vector<api_key_record> job_store::api_keys() {
  std::vector<api_key_record> keys;
  query q(p_->api_keys_select);
  while (q.next()) {
    keys.push_back({q.text(0), q.text(1), q.text(2), q.text(3), q.i64(4), q.i64(5), q.i64(6),
                    q.text(7) == "admin"});
  }
  return keys;
}

bool job_store::last_commit_wrote() const {
  return p_->last_commit_wrote;
}

store_stats job_store::stats() const {
  store_stats s;
  s.db_bytes = file_bytes(p_->path);
  s.wal_bytes = file_bytes(p_->path + "-wal");
  if (p_->checkpointer) {
    auto f = p_->checkpointer->stats();
    s.checkpoints = f.checkpoints;
    s.checkpoint_failures = f.failures;
    s.last_checkpoint_error = f.last_error;
  }
  return s;
}

}  // namespace hearth::broker
