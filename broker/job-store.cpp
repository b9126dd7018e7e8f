#include "broker/job-store.h"

#include "broker/wal-checkpointer.h"

#include <sqlite3.h>

#include <concepts>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace hearth::broker {
namespace {

// "HRTH" in the file header tells our database from another application's SQLite file;
// user_version is the layout below. A layout change bumps it and adds a step to `migrations`;
// open() upgrades older files in place and refuses newer ones.
constexpr int32_t hearth_application_id = 0x48525448;
constexpr int32_t hearth_schema_version = 2;

// uint64 values (seed, sizes) are stored as the int64 of the same bits.
// Large text comes last in a row: a listing reads the leading columns without its overflow pages.
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
  prompt TEXT NOT NULL,
  output TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_model ON jobs(model);
CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, id);
CREATE TABLE IF NOT EXISTS job_messages (
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  idx INTEGER NOT NULL,
  role TEXT NOT NULL,
  content TEXT NOT NULL,
  PRIMARY KEY (job_id, idx)
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
)sql";

// migrations[v - 1] turns a version-v file into version v + 1 (columns added by ALTER TABLE land
// at the end of the row; every query names its columns, so the order does not matter).
constexpr const char* migrations[] = {
    // 1 -> 2: job owners and node keys (authentication).
    "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX IF NOT EXISTS jobs_owner ON jobs(owner, id);"
    "ALTER TABLE nodes ADD COLUMN key TEXT NOT NULL DEFAULT '';",
};
static_assert(std::size(migrations) == hearth_schema_version - 1);

// Every column of a job_row, in the order read_job() expects; the output last so a listing can
// put '' in its place.
constexpr const char* job_columns =
    "id, model, priority, state, node, attempts, created_ms, started_ms, finished_ms, n_prompt, "
    "n_gen, stop_reason, error, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty, "
    "repeat_last_n, seed, stop, owner, prompt";

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

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using db_ptr = std::unique_ptr<sqlite3, db_closer>;

void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg ? msg : sqlite3_errmsg(db);
    sqlite3_free(msg);
    throw std::runtime_error(std::string(sql) + ": " + m);
  }
}

// A statement prepared once and kept for the life of the store.
class statement {
 public:
  statement(sqlite3* db, std::string sql) : db_(db), sql_(std::move(sql)) {
    if (sqlite3_prepare_v3(db, sql_.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) !=
        SQLITE_OK) {
      throw std::runtime_error("preparing " + sql_ + ": " + sqlite3_errmsg(db));
    }
  }
  ~statement() { sqlite3_finalize(s_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

 private:
  friend class query;
  sqlite3* db_;
  std::string sql_;
  sqlite3_stmt* s_ = nullptr;
};

// One execution of a statement: parameters bound in order, then stepped. The statement is reset
// when the query ends, because one left mid-SELECT keeps a read transaction open, which pins the
// WAL against checkpoints and, outside begin(), holds an implicit transaction.
// Text is bound without a copy, so it must outlive the query (temporary strings are refused).
class query {
 public:
  explicit query(statement& st) : st_(st) {}
  ~query() {
    sqlite3_reset(st_.s_);
    sqlite3_clear_bindings(st_.s_);
  }
  query(const query&) = delete;
  query& operator=(const query&) = delete;

  template <std::integral T>
  query& bind(T v) {
    return check(sqlite3_bind_int64(st_.s_, ++n_, static_cast<sqlite3_int64>(v)));
  }
  query& bind(double v) { return check(sqlite3_bind_double(st_.s_, ++n_, v)); }
  query& bind(std::string_view v) {
    // A null pointer would bind SQL NULL; an empty string_view may carry one.
    const char* p = v.data() ? v.data() : "";
    return check(sqlite3_bind_text64(st_.s_, ++n_, p, v.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  query& bind(const char* v) { return bind(std::string_view(v)); }
  query& bind_null() { return check(sqlite3_bind_null(st_.s_, ++n_)); }
  query& bind(std::string&&) = delete;

  // Steps once: true with a row to read, false when done.
  bool next() {
    int rc = sqlite3_step(st_.s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail();
  }
  void run() {
    while (next()) {
    }
  }

  int64_t i64(int col) { return sqlite3_column_int64(st_.s_, col); }
  double real(int col) { return sqlite3_column_double(st_.s_, col); }
  std::string text(int col) {
    auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st_.s_, col));
    return t ? std::string(t, static_cast<size_t>(sqlite3_column_bytes(st_.s_, col))) : "";
  }

 private:
  query& check(int rc) {
    if (rc != SQLITE_OK) fail();
    return *this;
  }
  [[noreturn]] void fail() { throw std::runtime_error(st_.sql_ + ": " + sqlite3_errmsg(st_.db_)); }

  statement& st_;
  int n_ = 0;
};

job_row read_job(query& q) {
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
  r.stop_reason = q.text(11);
  r.error = q.text(12);
  r.params.max_tokens = static_cast<int32_t>(q.i64(13));
  r.params.temperature = static_cast<float>(q.real(14));
  r.params.top_k = static_cast<int32_t>(q.i64(15));
  r.params.top_p = static_cast<float>(q.real(16));
  r.params.min_p = static_cast<float>(q.real(17));
  r.params.repeat_penalty = static_cast<float>(q.real(18));
  r.params.repeat_last_n = static_cast<int32_t>(q.i64(19));
  r.params.seed = static_cast<uint64_t>(q.i64(20));
  r.params.stop = decode_stop(q.text(21), r.id);
  r.owner = q.text(22);
  r.prompt = q.text(23);
  r.output = q.text(24);
  return r;
}

std::string select_jobs(const char* where_order) {
  return std::string("SELECT ") + job_columns + ", '' FROM jobs " + where_order;
}

}  // namespace

struct job_store::impl {
  explicit impl(sqlite3* conn)
      : db(conn),
        begin(conn, "BEGIN IMMEDIATE"),
        commit(conn, "COMMIT"),
        job_insert(conn,
                   "INSERT INTO jobs (model, priority, state, node, attempts, created_ms, "
                   "started_ms, finished_ms, n_prompt, n_gen, stop_reason, error, max_tokens, "
                   "temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed, stop, "
                   "owner, prompt, output) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                   "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        message_insert(conn,
                       "INSERT INTO job_messages (job_id, idx, role, content) VALUES (?, ?, ?, ?)"),
        event_insert(conn,
                     "INSERT INTO job_events (job_id, time_ms, event, attempt, node, detail) "
                     "VALUES (?, ?, ?, ?, ?, ?)"),
        job_assigned(conn,
                     "UPDATE jobs SET state = 'running', attempts = ?, node = ? WHERE id = ?"),
        job_started(conn,
                    "UPDATE jobs SET started_ms = ?, n_prompt = ? WHERE id = ? RETURNING node"),
        job_requeued(conn, "UPDATE jobs SET state = 'queued', output = '', n_gen = 0 WHERE id = ?"),
        // A finish without a node (a queued job cancelled) keeps the latest attempt's node.
        job_finished(conn,
                     "UPDATE jobs SET state = ?1, finished_ms = ?2, n_prompt = ?3, n_gen = ?4, "
                     "stop_reason = ?5, error = ?6, output = ?7, "
                     "node = CASE WHEN ?8 = '' THEN node ELSE ?8 END WHERE id = ?9"),
        // A batch arriving after the job's final must not replace the final output.
        job_output(conn,
                   "UPDATE jobs SET output = ?, n_gen = ? WHERE id = ? AND state = 'running'"),
        job_select(conn, std::string("SELECT ") + job_columns + ", output FROM jobs WHERE id = ?"),
        messages_select(conn,
                        "SELECT role, content FROM job_messages WHERE job_id = ? ORDER BY idx"),
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
        jobs_unfinished(conn, std::string("SELECT ") + job_columns +
                                  ", output FROM jobs WHERE state IN ('queued', 'running') "
                                  "ORDER BY id"),
        job_count(conn, "SELECT count(*) FROM jobs"),
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
        models_seen_select(conn, "SELECT name FROM models_seen ORDER BY name") {}

  // Declared first so that it is closed after every statement below is finalized.
  db_ptr db;
  statement begin, commit;
  statement job_insert, message_insert, event_insert;
  statement job_assigned, job_started, job_requeued, job_finished, job_output;
  statement job_select, messages_select, events_select;
  statement jobs_any, jobs_state, jobs_model, jobs_state_model, jobs_owner, jobs_unfinished;
  statement job_count;
  statement node_upsert, node_delete, models_seen_prune;
  statement node_gpus_delete, node_models_delete, node_gpu_insert, node_model_insert;
  statement model_seen_insert, node_seen, nodes_select, node_gpus_select, node_models_select;
  statement models_seen_select;
  // Declared last so that its connection closes first and the broker's connection, closing
  // last, checkpoints and removes the WAL.
  std::unique_ptr<wal_checkpointer> checkpointer;

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

  std::vector<job_row> collect(query& q) {
    std::vector<job_row> rows;
    while (q.next()) rows.push_back(read_job(q));
    return rows;
  }

  void fill_messages(job_row& r) {
    query q(messages_select);
    q.bind(r.id);
    while (q.next()) r.messages.push_back({q.text(0), q.text(1)});
  }
};

namespace {

// Reads one value of a pragma or query. The first read of the file: one that is not SQLite
// fails here.
std::string read_value(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
    throw std::runtime_error(sqlite3_errmsg(db));
  }
  int rc = sqlite3_step(s);
  auto* t = rc == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0)) : nullptr;
  std::string v = t ? t : "";
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW) throw std::runtime_error(sqlite3_errmsg(db));
  return v;
}

// Checks that the file is empty or a hearth database of our version and sets the connection up.
// Returns "" or what is wrong.
std::string prepare_database(sqlite3* db) {
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
  std::string mode = read_value(db, "PRAGMA journal_mode=WAL");
  if (mode != "wal" && mode != "memory") return "cannot use WAL mode (journal mode " + mode + ")";
  exec(db, "PRAGMA synchronous=NORMAL");
  // Checkpoints run on wal_checkpointer's thread, not inside the broker's commits.
  exec(db, "PRAGMA wal_autocheckpoint=0");
  exec(db, "PRAGMA foreign_keys=ON");
  if (!fresh && version < hearth_schema_version) {
    // One transaction for all steps: a failed upgrade leaves the file as it was.
    exec(db, "BEGIN IMMEDIATE");
    try {
      for (int64_t v = version; v < hearth_schema_version; ++v) exec(db, migrations[v - 1]);
      exec(db, ("PRAGMA user_version=" + std::to_string(hearth_schema_version)).c_str());
      exec(db, "COMMIT");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  if (fresh) {
    exec(db, "BEGIN IMMEDIATE");
    try {
      exec(db, schema_sql);
      exec(db, ("PRAGMA application_id=" + std::to_string(hearth_application_id)).c_str());
      exec(db, ("PRAGMA user_version=" + std::to_string(hearth_schema_version)).c_str());
      exec(db, "COMMIT");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  return "";
}

}  // namespace

result<std::unique_ptr<job_store>> job_store::open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  db_ptr db(raw);
  if (rc != SQLITE_OK) {
    std::string why = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    std::error_code ec;
    auto dir = std::filesystem::absolute(path, ec).parent_path();
    if (!ec && !std::filesystem::is_directory(dir, ec)) {
      why += " (directory " + dir.string() + " does not exist)";
    }
    return error{path + ": cannot open the job database: " + why};
  }
  try {
    sqlite3_extended_result_codes(db.get(), 1);
    sqlite3_busy_timeout(db.get(), 5000);
    if (std::string why = prepare_database(db.get()); !why.empty()) {
      return error{path + ": " + why};
    }
    auto p = std::make_unique<impl>(db.release());
    p->checkpointer = std::make_unique<wal_checkpointer>(path, std::chrono::milliseconds(100));
    return std::unique_ptr<job_store>(new job_store(std::move(p)));
  } catch (const std::exception& e) {
    return error{path + ": " + e.what()};
  }
}

job_store::job_store(std::unique_ptr<impl> p) : p_(std::move(p)) {}
job_store::~job_store() = default;

void job_store::begin() {
  query(p_->begin).run();
}

void job_store::commit() {
  try {
    query(p_->commit).run();
  } catch (...) {
    // A failed COMMIT (busy, I/O) may leave the transaction open; end it so the next begin()
    // starts clean and nothing of this burst is half-kept.
    if (sqlite3_get_autocommit(p_->db.get()) == 0) {
      sqlite3_exec(p_->db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
    throw;
  }
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
    q.bind(row.owner).bind(row.prompt).bind(row.output).run();
  }
  uint64_t id = static_cast<uint64_t>(sqlite3_last_insert_rowid(p_->db.get()));
  for (size_t i = 0; i < row.messages.size(); ++i) {
    const auto& m = row.messages[i];
    query(p_->message_insert).bind(id).bind(i).bind(m.role).bind(m.content).run();
  }
  p_->event(id, now_ms, "queued", 0, "", "");
  w.done();
  row.id = id;
  row.state = wire::job_state::queued;
  row.created_ms = now_ms;
  return id;
}

void job_store::job_assigned(uint64_t id, uint32_t attempt, const std::string& node,
                             int64_t now_ms) {
  impl::write_scope w(*p_);
  query(p_->job_assigned).bind(attempt).bind(node).bind(id).run();
  p_->expect_changed("job_assigned", id);
  p_->event(id, now_ms, "assigned", attempt, node, "");
  w.done();
}

void job_store::job_started(uint64_t id, uint32_t attempt, uint32_t n_prompt, int64_t now_ms) {
  impl::write_scope w(*p_);
  std::string node;
  {
    query q(p_->job_started);
    q.bind(now_ms).bind(n_prompt).bind(id);
    if (!q.next()) throw std::runtime_error("job_started: no job " + std::to_string(id));
    node = q.text(0);
  }
  p_->event(id, now_ms, "started", attempt, node, "");
  w.done();
}

void job_store::job_requeued(uint64_t id, uint32_t attempt, const std::string& node,
                             const std::string& why, int64_t now_ms) {
  impl::write_scope w(*p_);
  query(p_->job_requeued).bind(id).run();
  p_->expect_changed("job_requeued", id);
  p_->event(id, now_ms, "requeued", attempt, node, why);
  w.done();
}

void job_store::job_finished(uint64_t id, uint32_t attempt, const std::string& node,
                             wire::job_state state, const std::string& stop_reason,
                             const std::string& error, uint32_t n_prompt, uint32_t n_gen,
                             const std::string& output, int64_t now_ms) {
  if (!wire::job_state_is_final(state)) {
    throw std::invalid_argument("job_finished: " + std::string(wire::job_state_name(state)) +
                                " is not a final state");
  }
  std::string_view name = wire::job_state_name(state);
  impl::write_scope w(*p_);
  query q(p_->job_finished);
  q.bind(name).bind(now_ms).bind(n_prompt).bind(n_gen).bind(stop_reason).bind(error);
  q.bind(output).bind(node).bind(id).run();
  p_->expect_changed("job_finished", id);
  p_->event(id, now_ms, name, attempt, node, error.empty() ? stop_reason : error);
  w.done();
}

void job_store::job_output(uint64_t id, const std::string& output, uint32_t n_gen) {
  query(p_->job_output).bind(output).bind(n_gen).bind(id).run();
}

std::optional<job_row> job_store::job(uint64_t id) {
  std::optional<job_row> r;
  {
    query q(p_->job_select);
    q.bind(id);
    if (!q.next()) return std::nullopt;
    r = read_job(q);
  }
  p_->fill_messages(*r);
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
  std::vector<job_row> rows;
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
    rows = p_->collect(q);
  } else {
    bool by_model = !f.model.empty();
    statement& st = f.state ? (by_model ? p_->jobs_state_model : p_->jobs_state)
                            : (by_model ? p_->jobs_model : p_->jobs_any);
    query q(st);
    if (f.state) q.bind(state);
    if (by_model) q.bind(f.model);
    q.bind(f.limit);
    rows = p_->collect(q);
  }
  for (auto& r : rows) p_->fill_messages(r);
  return rows;
}

std::vector<job_row> job_store::unfinished_jobs() {
  std::vector<job_row> rows;
  {
    query q(p_->jobs_unfinished);
    rows = p_->collect(q);
  }
  for (auto& r : rows) p_->fill_messages(r);
  return rows;
}

uint64_t job_store::job_count() {
  query q(p_->job_count);
  return q.next() ? static_cast<uint64_t>(q.i64(0)) : 0;
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

}  // namespace hearth::broker
