#include "common/sqlite.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace hearth::sqlite {
namespace {

class sqlite_test : public ::testing::Test {
 protected:
  void SetUp() override {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(":memory:", &raw), SQLITE_OK);
    db_.reset(raw);
    sqlite3_extended_result_codes(db(), 1);
    exec(db(), "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL, b BLOB)");
  }
  sqlite3* db() { return db_.get(); }
  int64_t rows() { return std::stoll(read_value(db(), "SELECT count(*) FROM t")); }

  db_ptr db_;
};

TEST_F(sqlite_test, a_value_longer_than_sqlite_takes_is_refused_when_bound) {
  sqlite3_limit(db(), SQLITE_LIMIT_LENGTH, 1000);
  const std::string big(1001, 'x');
  for (bool blob : {false, true}) {
    query_once q(db(), "INSERT INTO t (k, v, b) VALUES (1, ?, ?)");
    try {
      if (blob) {
        q.bind("fits").bind_blob(big);
      } else {
        q.bind(std::string_view(big));
      }
      FAIL() << "bound " << big.size() << " bytes";
    } catch (const failure& e) {
      EXPECT_EQ(e.sqlite_code(), SQLITE_TOOBIG);
      const std::string what = e.what();
      EXPECT_NE(what.find(blob ? "binding parameter 2 of INSERT INTO t" : "binding parameter 1"),
                std::string::npos)
          << what;
    }
  }
  EXPECT_EQ(rows(), 0) << "nothing stored cut short";
}

TEST_F(sqlite_test, an_empty_value_is_empty_text_not_null) {
  query_once(db(), "INSERT INTO t (k, v) VALUES (1, ?)").bind(std::string_view()).run();
  EXPECT_EQ(read_value(db(), "SELECT typeof(v) || ':' || length(v) FROM t"), "text:0");
}

TEST_F(sqlite_test, a_kept_statement_runs_again_after_a_query_left_mid_select) {
  exec(db(), "INSERT INTO t (k, v) VALUES (1, 'a'), (2, 'b')");
  statement st(db(), "SELECT v FROM t WHERE k >= ? ORDER BY k", true);
  {
    query q(st);
    q.bind(1);
    ASSERT_TRUE(q.next());
    EXPECT_EQ(q.text(0), "a");
  }  // left with a row unread: reset, else binding again would be SQLITE_MISUSE
  query q(st);
  q.bind(2);
  ASSERT_TRUE(q.next());
  EXPECT_EQ(q.text(0), "b");
  EXPECT_FALSE(q.next());
}

TEST_F(sqlite_test, a_failing_step_names_the_statement_and_the_code) {
  exec(db(), "INSERT INTO t (k, v) VALUES (1, 'a')");
  try {
    query_once(db(), "INSERT INTO t (k, v) VALUES (1, 'again')").run();
    FAIL();
  } catch (const failure& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_CONSTRAINT_PRIMARYKEY);
    EXPECT_NE(std::string(e.what()).find("INSERT INTO t (k, v) VALUES (1, 'again'): UNIQUE"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(query_once(db(), "SELECT nope FROM t"), failure) << "preparing fails";
  EXPECT_THROW(exec(db(), "INSERT INTO nowhere VALUES (1)"), failure);
}

TEST_F(sqlite_test, a_transaction_keeps_nothing_unless_committed) {
  try {
    transaction t(db());
    exec(db(), "INSERT INTO t (k, v) VALUES (1, 'a')");
    query_once(db(), "INSERT INTO t (k, v) VALUES (1, 'b')").run();  // throws
    t.commit();
  } catch (const failure&) {
  }
  EXPECT_EQ(rows(), 0);
  EXPECT_TRUE(sqlite3_get_autocommit(db())) << "rolled back, not left open";
  {
    transaction t(db());
    exec(db(), "INSERT INTO t (k, v) VALUES (1, 'a')");
    t.commit();
  }
  EXPECT_EQ(rows(), 1);
}

TEST(sqlite, a_file_that_is_not_sqlite_fails_on_the_first_read) {
  const std::string path = ::testing::TempDir() + "not-sqlite.db";
  std::ofstream(path) << std::string(4096, 'z');
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  db_ptr db(raw);
  try {
    read_value(db.get(), "PRAGMA user_version");
    FAIL();
  } catch (const failure& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_NOTADB);
    EXPECT_NE(std::string(e.what()).find("file is not a database"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hearth::sqlite
