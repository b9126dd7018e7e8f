#include "gateway/batch-store.h"

#include <openssl/rand.h>
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <stdexcept>

#include "common/sqlite.h"

namespace hearth::gateway {
namespace {

// "HGWY" in the file header tells the gateway's database from the broker's (or another
// application's) SQLite file; user_version is the layout below. A layout change bumps it and
// adds a migration step.
constexpr int32_t gateway_application_id = 0x48475759;
constexpr int32_t gateway_schema_version = 1;

// Batches are listed by `seq` (the order they were made), files by `seq` too: ids are random.
// A line's body is kept beside its batch, so deleting the input file does not stop the batch.
constexpr const char* schema_sql = R"sql(
CREATE TABLE files (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  filename TEXT NOT NULL,
  purpose TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  content BLOB NOT NULL
);
CREATE INDEX files_owner ON files(owner, seq);
CREATE TABLE batches (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  owner TEXT NOT NULL,
  api_key TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  input_file_id TEXT NOT NULL,
  completion_window TEXT NOT NULL,
  metadata TEXT NOT NULL,
  errors TEXT NOT NULL,
  status TEXT NOT NULL,
  output_file_id TEXT NOT NULL,
  error_file_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  in_progress_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  finalizing_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  failed_at INTEGER NOT NULL,
  expired_at INTEGER NOT NULL,
  cancelling_at INTEGER NOT NULL,
  cancelled_at INTEGER NOT NULL,
  total INTEGER NOT NULL,
  completed INTEGER NOT NULL,
  failed INTEGER NOT NULL
);
CREATE INDEX batches_owner ON batches(owner, seq);
CREATE TABLE batch_lines (
  batch_id TEXT NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
  line INTEGER NOT NULL,
  custom_id TEXT NOT NULL,
  body TEXT NOT NULL,
  state TEXT NOT NULL,  -- pending, submitted, completed, failed
  job_id INTEGER NOT NULL,
  status_code INTEGER NOT NULL,
  result TEXT NOT NULL,
  PRIMARY KEY (batch_id, line)
) WITHOUT ROWID;
)sql";

constexpr const char* final_statuses = "('completed','failed','expired','cancelled')";

constexpr std::array<std::string_view, 8> status_names = {"validating", "failed",    "in_progress",
                                                          "finalizing", "completed", "expired",
                                                          "cancelling", "cancelled"};
constexpr std::array<std::string_view, 4> line_state_names = {"pending", "submitted", "completed",
                                                              "failed"};

using sqlite::db_ptr;
using sqlite::exec;
using sqlite::read_value;
using sqlite::transaction;
// Each statement is prepared when it runs: microseconds, beside the fsync of every commit.
// SQLite failing under the gateway (disk full, I/O error) throws sqlite::failure; the HTTP handler
// that called answers 500, and the file holds what the last commit left.
using stmt = sqlite::query_once;

// Returns "" or why the file cannot be used.
std::string prepare_schema(sqlite3* db) {
  int64_t app_id = std::stoll(read_value(db, "PRAGMA application_id"));
  int64_t version = std::stoll(read_value(db, "PRAGMA user_version"));
  int64_t objects = std::stoll(read_value(db, "SELECT count(*) FROM sqlite_master"));
  bool fresh = app_id == 0 && version == 0 && objects == 0;
  if (!fresh && app_id != gateway_application_id) {
    return "not a hearth gateway database (application_id " + std::to_string(app_id) +
           ", expected " + std::to_string(gateway_application_id) + ")";
  }
  if (!fresh && (version < 1 || version > gateway_schema_version)) {
    return "gateway schema version " + std::to_string(version) + ", this gateway reads version " +
           std::to_string(gateway_schema_version);
  }
  std::string mode = read_value(db, "PRAGMA journal_mode=WAL");
  if (mode != "wal" && mode != "memory") return "cannot use WAL mode (journal mode " + mode + ")";
  // Each commit is fsync'd before the client hears of it.
  exec(db, "PRAGMA synchronous=FULL");
  exec(db, "PRAGMA foreign_keys=ON");
  exec(db, "PRAGMA temp_store=MEMORY");
  if (fresh) {
    transaction t(db);
    exec(db, std::string(schema_sql) +
                 "PRAGMA application_id=" + std::to_string(gateway_application_id) +
                 ";PRAGMA user_version=" + std::to_string(gateway_schema_version) + ";");
    t.commit();
  }
  return "";
}

constexpr const char* batch_columns =
    "id, owner, api_key, endpoint, input_file_id, completion_window, metadata, errors, status, "
    "output_file_id, error_file_id, created_at, in_progress_at, expires_at, finalizing_at, "
    "completed_at, failed_at, expired_at, cancelling_at, cancelled_at, total, completed, failed";

batch_row read_batch(stmt& s) {
  batch_row b;
  b.id = s.text(0);
  b.owner = s.text(1);
  b.api_key = s.text(2);
  b.endpoint = s.text(3);
  b.input_file_id = s.text(4);
  b.completion_window = s.text(5);
  b.metadata_json = s.text(6);
  b.errors_json = s.text(7);
  b.status = batch_status_from_name(s.text(8)).value_or(batch_status::failed);
  b.output_file_id = s.text(9);
  b.error_file_id = s.text(10);
  int64_t* times[] = {&b.created_at,    &b.in_progress_at, &b.expires_at,
                      &b.finalizing_at, &b.completed_at,   &b.failed_at,
                      &b.expired_at,    &b.cancelling_at,  &b.cancelled_at};
  for (int i = 0; i < 9; ++i) *times[i] = s.i64(11 + i);
  b.total = uint32_t(s.i64(20));
  b.completed = uint32_t(s.i64(21));
  b.failed = uint32_t(s.i64(22));
  return b;
}

constexpr const char* file_columns = "id, owner, filename, purpose, bytes, created_at";

file_row read_file(stmt& s) {
  return {s.text(0), s.text(1), s.text(2), s.text(3), uint64_t(s.i64(4)), s.i64(5)};
}

void insert_file(sqlite3* db, const file_row& f, std::string_view content) {
  stmt s(db,
         "INSERT INTO files (id, owner, filename, purpose, bytes, created_at, content) "
         "VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.bind(f.id).bind(f.owner).bind(f.filename).bind(f.purpose).bind(int64_t(content.size()));
  s.bind(f.created_at).bind_blob(content).run();
}

}  // namespace

int64_t batch_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string_view batch_status_name(batch_status s) {
  return status_names[size_t(s)];
}

std::optional<batch_status> batch_status_from_name(std::string_view name) {
  for (size_t i = 0; i < status_names.size(); ++i) {
    if (status_names[i] == name) return batch_status(i);
  }
  return std::nullopt;
}

bool batch_status_is_final(batch_status s) {
  return s == batch_status::completed || s == batch_status::failed || s == batch_status::expired ||
         s == batch_status::cancelled;
}

struct batch_store::impl {
  db_ptr db;
};

result<std::unique_ptr<batch_store>> batch_store::open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  db_ptr db(raw);
  if (rc != SQLITE_OK) {
    return error{path + ": cannot open the gateway database: " +
                 (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc))};
  }
  // The file holds the API keys of unfinished batches: only its owner reads it.
  if (path != ":memory:" && !path.empty()) chmod(path.c_str(), 0600);
  try {
    sqlite3_extended_result_codes(db.get(), 1);
    sqlite3_busy_timeout(db.get(), 5000);
    if (std::string why = prepare_schema(db.get()); !why.empty()) return error{path + ": " + why};
  } catch (const std::exception& e) {
    return error{path + ": " + e.what()};
  }
  auto p = std::make_unique<impl>();
  p->db = std::move(db);
  return std::unique_ptr<batch_store>(new batch_store(std::move(p)));
}

batch_store::batch_store(std::unique_ptr<impl> p) : p_(std::move(p)) {}
batch_store::~batch_store() = default;

std::string batch_store::new_id(std::string_view prefix) {
  unsigned char bytes[12];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  static constexpr char hex[] = "0123456789abcdef";
  std::string id(prefix);
  for (unsigned char b : bytes) {
    id += hex[b >> 4];
    id += hex[b & 15];
  }
  return id;
}

void batch_store::file_insert(const file_row& f, std::string_view content) {
  transaction t(p_->db.get());
  insert_file(p_->db.get(), f, content);
  t.commit();
}

std::optional<file_row> batch_store::file_get(std::string_view owner, std::string_view id) {
  stmt s(p_->db.get(),
         std::string("SELECT ") + file_columns + " FROM files WHERE id = ? AND owner = ?");
  s.bind(id).bind(owner);
  if (!s.next()) return std::nullopt;
  return read_file(s);
}

std::optional<std::string> batch_store::file_content(std::string_view owner, std::string_view id) {
  stmt s(p_->db.get(), "SELECT content FROM files WHERE id = ? AND owner = ?");
  s.bind(id).bind(owner);
  if (!s.next()) return std::nullopt;
  return std::string(s.blob(0));
}

std::vector<file_row> batch_store::file_list(std::string_view owner, std::string_view purpose,
                                             uint32_t limit, std::string_view after,
                                             bool& has_more) {
  stmt s(p_->db.get(),
         std::string("SELECT ") + file_columns +
             " FROM files WHERE owner = ?1 AND (?2 = '' OR purpose = ?2) AND (?3 = '' OR seq < "
             "coalesce((SELECT seq FROM files WHERE id = ?3 AND owner = ?1), 9223372036854775807)) "
             "ORDER BY seq DESC LIMIT ?4");
  s.bind(owner).bind(purpose).bind(after).bind(int64_t(limit) + 1);
  std::vector<file_row> out;
  while (s.next()) out.push_back(read_file(s));
  has_more = out.size() > limit;
  if (has_more) out.pop_back();
  return out;
}

bool batch_store::file_delete(std::string_view owner, std::string_view id) {
  transaction t(p_->db.get());
  stmt s(p_->db.get(), "DELETE FROM files WHERE id = ? AND owner = ?");
  s.bind(id).bind(owner).run();
  bool deleted = sqlite3_changes(p_->db.get()) > 0;
  t.commit();
  return deleted;
}

owner_usage batch_store::usage(std::string_view owner) {
  owner_usage u;
  {
    stmt s(p_->db.get(), "SELECT count(*), coalesce(sum(bytes), 0) FROM files WHERE owner = ?");
    s.bind(owner);
    if (s.next()) {
      u.files = uint32_t(s.i64(0));
      u.bytes = uint64_t(s.i64(1));
    }
  }
  stmt s(p_->db.get(),
         std::string("SELECT count(*) FROM batches WHERE owner = ? AND status NOT IN ") +
             final_statuses);
  s.bind(owner);
  if (s.next()) u.batches_unfinished = uint32_t(s.i64(0));
  return u;
}

void batch_store::batch_insert(const batch_row& b, const std::vector<line_row>& lines) {
  sqlite3* db = p_->db.get();
  transaction t(db);
  {
    stmt s(db, std::string("INSERT INTO batches (") + batch_columns +
                   ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(b.id).bind(b.owner).bind(b.api_key).bind(b.endpoint).bind(b.input_file_id);
    s.bind(b.completion_window).bind(b.metadata_json).bind(b.errors_json);
    s.bind(batch_status_name(b.status)).bind(b.output_file_id).bind(b.error_file_id);
    for (int64_t v : {b.created_at, b.in_progress_at, b.expires_at, b.finalizing_at, b.completed_at,
                      b.failed_at, b.expired_at, b.cancelling_at, b.cancelled_at})
      s.bind(v);
    s.bind(int64_t(b.total)).bind(int64_t(b.completed)).bind(int64_t(b.failed)).run();
  }
  // One statement reused for every line: a 50,000-line batch is one transaction of resets.
  sqlite::statement insert_line(db,
                                "INSERT INTO batch_lines (batch_id, line, custom_id, body, state, "
                                "job_id, status_code, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  for (const line_row& l : lines) {
    sqlite::query q(insert_line);
    q.bind(b.id).bind(l.index).bind(l.custom_id).bind(l.body);
    q.bind(line_state_names[size_t(l.state)]).bind(l.job_id).bind(l.status_code);
    q.bind(l.result_json).run();
  }
  t.commit();
}

std::optional<batch_row> batch_store::batch_get(std::string_view owner, std::string_view id) {
  stmt s(p_->db.get(),
         std::string("SELECT ") + batch_columns + " FROM batches WHERE id = ? AND owner = ?");
  s.bind(id).bind(owner);
  if (!s.next()) return std::nullopt;
  return read_batch(s);
}

std::vector<batch_row> batch_store::batch_list(std::string_view owner, uint32_t limit,
                                               std::string_view after, bool& has_more) {
  stmt s(p_->db.get(),
         std::string("SELECT ") + batch_columns +
             " FROM batches WHERE owner = ?1 AND (?2 = '' OR seq < coalesce((SELECT seq "
             "FROM batches WHERE "
             "id = ?2 AND owner = ?1), 9223372036854775807)) ORDER BY seq DESC LIMIT ?3");
  s.bind(owner).bind(after).bind(int64_t(limit) + 1);
  std::vector<batch_row> out;
  while (s.next()) out.push_back(read_batch(s));
  has_more = out.size() > limit;
  if (has_more) out.pop_back();
  return out;
}

std::vector<batch_row> batch_store::batches_unfinished() {
  stmt s(p_->db.get(), std::string("SELECT ") + batch_columns +
                           " FROM batches WHERE status NOT IN " + final_statuses + " ORDER BY seq");
  std::vector<batch_row> out;
  while (s.next()) out.push_back(read_batch(s));
  return out;
}

namespace {

void update_batch(sqlite3* db, const batch_row& b) {
  stmt s(db,
         "UPDATE batches SET api_key = ?, errors = ?, status = ?, output_file_id = ?, "
         "error_file_id = ?, in_progress_at = ?, expires_at = ?, finalizing_at = ?, "
         "completed_at = ?, failed_at = ?, expired_at = ?, cancelling_at = ?, cancelled_at = ?, "
         "total = ? WHERE id = ?");
  s.bind(batch_status_is_final(b.status) ? std::string_view() : std::string_view(b.api_key));
  s.bind(b.errors_json).bind(batch_status_name(b.status)).bind(b.output_file_id);
  s.bind(b.error_file_id);
  for (int64_t v : {b.in_progress_at, b.expires_at, b.finalizing_at, b.completed_at, b.failed_at,
                    b.expired_at, b.cancelling_at, b.cancelled_at})
    s.bind(v);
  s.bind(int64_t(b.total)).bind(b.id).run();
}

}  // namespace

void batch_store::batch_update(const batch_row& b) {
  transaction t(p_->db.get());
  update_batch(p_->db.get(), b);
  t.commit();
}

void batch_store::batch_finish(const batch_row& b,
                               const std::vector<std::pair<file_row, std::string>>& files) {
  transaction t(p_->db.get());
  for (const auto& [f, content] : files) insert_file(p_->db.get(), f, content);
  update_batch(p_->db.get(), b);
  t.commit();
}

std::vector<line_row> batch_store::lines(std::string_view batch_id) {
  stmt s(p_->db.get(),
         "SELECT line, custom_id, body, state, job_id, status_code, result FROM batch_lines "
         "WHERE batch_id = ? ORDER BY line");
  s.bind(batch_id);
  std::vector<line_row> out;
  while (s.next()) {
    line_row l;
    l.index = uint32_t(s.i64(0));
    l.custom_id = s.text(1);
    l.body = s.text(2);
    std::string st = s.text(3);
    for (size_t i = 0; i < line_state_names.size(); ++i) {
      if (line_state_names[i] == st) l.state = line_state(i);
    }
    l.job_id = uint64_t(s.i64(4));
    l.status_code = int32_t(s.i64(5));
    l.result_json = s.text(6);
    out.push_back(std::move(l));
  }
  return out;
}

void batch_store::line_submitted(std::string_view batch_id, uint32_t index, uint64_t job_id) {
  transaction t(p_->db.get());
  stmt s(p_->db.get(),
         "UPDATE batch_lines SET state = 'submitted', job_id = ? WHERE batch_id = ? AND line = ? "
         "AND state IN ('pending', 'submitted')");
  s.bind(int64_t(job_id)).bind(batch_id).bind(int64_t(index)).run();
  t.commit();
}

bool batch_store::line_finished(std::string_view batch_id, uint32_t index, line_state state,
                                int32_t status_code, std::string_view result_json) {
  if (state != line_state::completed && state != line_state::failed) {
    throw std::invalid_argument("line_finished: the state must be completed or failed");
  }
  sqlite3* db = p_->db.get();
  transaction t(db);
  {
    stmt s(db,
           "UPDATE batch_lines SET state = ?, status_code = ?, result = ? WHERE batch_id = ? AND "
           "line = ? AND state IN ('pending', 'submitted')");
    s.bind(line_state_names[size_t(state)]).bind(int64_t(status_code)).bind(result_json);
    s.bind(batch_id).bind(int64_t(index)).run();
  }
  if (sqlite3_changes(db) == 0) return false;
  stmt s(db, state == line_state::completed
                 ? "UPDATE batches SET completed = completed + 1 WHERE id = ?"
                 : "UPDATE batches SET failed = failed + 1 WHERE id = ?");
  s.bind(batch_id).run();
  t.commit();
  return true;
}

uint32_t batch_store::lines_fail_pending(std::string_view batch_id, std::string_view result_json) {
  sqlite3* db = p_->db.get();
  transaction t(db);
  {
    stmt s(db,
           "UPDATE batch_lines SET state = 'failed', status_code = 0, result = ? WHERE batch_id = "
           "? AND state = 'pending'");
    s.bind(result_json).bind(batch_id).run();
  }
  auto n = uint32_t(sqlite3_changes(db));
  stmt s(db, "UPDATE batches SET failed = failed + ? WHERE id = ?");
  s.bind(int64_t(n)).bind(batch_id).run();
  t.commit();
  return n;
}

}  // namespace hearth::gateway
