// SQLite as the broker's job store and the gateway's batch store use it: a statement prepared
// once, a query that binds its parameters in order and steps it, one-off SQL, and a transaction
// rolled back unless committed. Every call's result code is checked: SQLite failing (disk full, an
// I/O error, a value longer than it takes, a constraint) throws sqlite::failure naming the
// statement, never a silent NULL or a value cut short. Sizes are bound whole (the 64-bit calls).
#pragma once

#include <sqlite3.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hearth::sqlite {

// SQLite failing: the message names the statement and SQLite's reason; sqlite_code() is the
// extended result code (connections turn extended codes on).
class failure : public std::runtime_error {
 public:
  failure(const std::string& what, int sqlite_code)
      : std::runtime_error(what), code_(sqlite_code) {}
  int sqlite_code() const { return code_; }

 private:
  int code_;
};

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using db_ptr = std::unique_ptr<sqlite3, db_closer>;

// Runs one or more SQL statements.
inline void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  if (int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg); rc != SQLITE_OK) {
    std::string m = msg ? msg : sqlite3_errmsg(db);
    sqlite3_free(msg);
    throw failure(std::string(sql) + ": " + m, sqlite3_extended_errcode(db));
  }
}
inline void exec(sqlite3* db, const std::string& sql) {
  exec(db, sql.c_str());
}

// A prepared statement. `persistent` tells SQLite it is kept for the life of the connection.
class statement {
 public:
  statement(sqlite3* db, std::string sql, bool persistent = false) : db_(db), sql_(std::move(sql)) {
    const unsigned flags = persistent ? SQLITE_PREPARE_PERSISTENT : 0;
    if (int rc = sqlite3_prepare_v3(db, sql_.c_str(), -1, flags, &s_, nullptr); rc != SQLITE_OK) {
      throw failure("preparing " + sql_ + ": " + sqlite3_errmsg(db), rc);
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
// WAL against checkpoints and, outside a transaction, holds an implicit one.
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
  // A null pointer would bind SQL NULL; an empty string_view may carry one. A value longer than
  // SQLite takes (SQLITE_LIMIT_LENGTH, 1,000,000,000 bytes by default) is an error here.
  query& bind(std::string_view v) {
    const char* p = v.data() ? v.data() : "";
    return check(sqlite3_bind_text64(st_.s_, ++n_, p, v.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  query& bind(const char* v) { return bind(std::string_view(v)); }
  query& bind(std::string&&) = delete;
  query& bind_blob(std::string_view v) {
    const char* p = v.data() ? v.data() : "";
    return check(sqlite3_bind_blob64(st_.s_, ++n_, p, v.size(), SQLITE_STATIC));
  }
  query& bind_null() { return check(sqlite3_bind_null(st_.s_, ++n_)); }

  // Steps once: true with a row to read, false when done.
  bool next() {
    int rc = sqlite3_step(st_.s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw failure(st_.sql_ + ": " + sqlite3_errmsg(st_.db_), rc);
  }
  // Steps to the end.
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
  // Valid until the next step or the end of the query.
  std::string_view blob(int col) {
    auto* b = static_cast<const char*>(sqlite3_column_blob(st_.s_, col));
    return b ? std::string_view(b, static_cast<size_t>(sqlite3_column_bytes(st_.s_, col)))
             : std::string_view();
  }

 private:
  query& check(int rc) {
    if (rc != SQLITE_OK) {
      throw failure(
          "binding parameter " + std::to_string(n_) + " of " + st_.sql_ + ": " + sqlite3_errstr(rc),
          rc);
    }
    return *this;
  }

  statement& st_;
  int n_ = 0;
};

namespace detail {
struct holds_statement {
  statement st;
};
}  // namespace detail

// A statement prepared for one query: for SQL run now and then, not worth keeping prepared.
class query_once : private detail::holds_statement, public query {
 public:
  query_once(sqlite3* db, std::string sql)
      : detail::holds_statement{statement(db, std::move(sql))}, query(st) {}
};

// The first column of the first row of `sql` (a pragma, a count) as text. The first read of a
// file: one that is not SQLite fails here.
inline std::string read_value(sqlite3* db, const std::string& sql) {
  query_once q(db, sql);
  if (!q.next()) throw failure(sql + ": no row", SQLITE_ERROR);
  return q.text(0);
}

// BEGIN IMMEDIATE (the write lock at once, so the transaction cannot fail to upgrade later) ...
// COMMIT; rolled back when the scope ends without commit(), an exception included.
class transaction {
 public:
  explicit transaction(sqlite3* db) : db_(db) { exec(db, "BEGIN IMMEDIATE"); }
  ~transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace hearth::sqlite
