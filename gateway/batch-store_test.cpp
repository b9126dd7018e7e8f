#include "gateway/batch-store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

namespace hearth::gateway {
namespace {

class batch_store_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hearth-batch-store-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name = "gateway.db") const { return (dir_ / name).string(); }

  std::unique_ptr<batch_store> open(const std::string& name = "gateway.db") {
    auto s = batch_store::open(path(name));
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.message());
    return s.ok() ? std::move(s).value() : nullptr;
  }

  std::string pragma(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK);
    std::string v;
    if (sqlite3_step(s) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
  }

  static batch_row make_batch(const std::string& owner, uint32_t total) {
    batch_row b;
    b.id = batch_store::new_id("batch_");
    b.owner = owner;
    b.api_key = "sk-secret";
    b.endpoint = "/v1/chat/completions";
    b.input_file_id = "file-x";
    b.completion_window = "24h";
    b.metadata_json = R"({"k":"v"})";
    b.errors_json = "null";
    b.status = batch_status::in_progress;
    b.created_at = 1000;
    b.in_progress_at = 1001;
    b.expires_at = 1000 + 86400;
    b.total = total;
    return b;
  }
  static std::vector<line_row> make_lines(uint32_t n) {
    std::vector<line_row> lines;
    for (uint32_t i = 0; i < n; ++i) {
      line_row l;
      l.index = i;
      l.custom_id = "req-" + std::to_string(i);
      l.body = R"({"model":"m","messages":[{"role":"user","content":"hi )" + std::to_string(i) +
               R"("}]})";
      lines.push_back(l);
    }
    return lines;
  }

  std::filesystem::path dir_;
};

TEST_F(batch_store_test, a_new_file_is_wal_full_sync_versioned_and_private) {
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma("PRAGMA user_version"), "1");
  EXPECT_EQ(pragma("PRAGMA application_id"), std::to_string(0x48475759));
  struct stat st {};
  ASSERT_EQ(stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the file holds API keys of unfinished batches";
}

TEST_F(batch_store_test, refuses_another_applications_file_and_a_newer_version) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path("other.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA application_id=1234", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto other = batch_store::open(path("other.db"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("not a hearth gateway database (application_id 1234"),
            std::string::npos)
      << other.message();

  { auto s = open("newer.db"); }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path("newer.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=7", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto newer = batch_store::open(path("newer.db"));
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.message().find("schema version 7, this gateway reads version 1"),
            std::string::npos)
      << newer.message();

  auto missing = batch_store::open(path("no/such/dir/gateway.db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no/such/dir/gateway.db"), std::string::npos);
}

TEST_F(batch_store_test, ids_are_random_and_prefixed) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    std::string id = batch_store::new_id("file-");
    ASSERT_EQ(id.size(), 5u + 24u) << id;
    ASSERT_EQ(id.rfind("file-", 0), 0u) << id;
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST_F(batch_store_test, files_belong_to_their_owner) {
  auto s = open();
  ASSERT_TRUE(s);
  std::string content = "line one\n\0binary\xff\n";
  content += std::string(1, '\0');
  file_row f{batch_store::new_id("file-"), "alice", "in.jsonl", "batch", 0, 42};
  s->file_insert(f, content);

  auto got = s->file_get("alice", f.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->filename, "in.jsonl");
  EXPECT_EQ(got->purpose, "batch");
  EXPECT_EQ(got->bytes, content.size());
  EXPECT_EQ(got->created_at, 42);
  EXPECT_EQ(s->file_content("alice", f.id), content) << "bytes come back as they were";

  EXPECT_FALSE(s->file_get("bob", f.id));
  EXPECT_FALSE(s->file_content("bob", f.id));
  EXPECT_FALSE(s->file_delete("bob", f.id));
  bool more = true;
  EXPECT_TRUE(s->file_list("bob", "", 100, "", more).empty());
  EXPECT_FALSE(more);

  owner_usage u = s->usage("alice");
  EXPECT_EQ(u.files, 1u);
  EXPECT_EQ(u.bytes, content.size());
  EXPECT_EQ(s->usage("bob").files, 0u);

  EXPECT_TRUE(s->file_delete("alice", f.id));
  EXPECT_FALSE(s->file_get("alice", f.id));
  EXPECT_FALSE(s->file_delete("alice", f.id));
}

TEST_F(batch_store_test, file_list_pages_newest_first_and_filters_by_purpose) {
  auto s = open();
  ASSERT_TRUE(s);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    file_row f{batch_store::new_id("file-"),     "alice", "f" + std::to_string(i),
               i % 2 ? "batch_output" : "batch", 0,       i};
    s->file_insert(f, "x");
    ids.push_back(f.id);
  }
  bool more = false;
  auto page1 = s->file_list("alice", "", 2, "", more);
  ASSERT_EQ(page1.size(), 2u);
  EXPECT_TRUE(more);
  EXPECT_EQ(page1[0].id, ids[4]);
  EXPECT_EQ(page1[1].id, ids[3]);
  auto page2 = s->file_list("alice", "", 2, page1.back().id, more);
  ASSERT_EQ(page2.size(), 2u);
  EXPECT_EQ(page2[0].id, ids[2]);
  auto outputs = s->file_list("alice", "batch_output", 100, "", more);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_FALSE(more);
  EXPECT_EQ(outputs[0].id, ids[3]);
  EXPECT_EQ(outputs[1].id, ids[1]);
}

TEST_F(batch_store_test, a_batch_and_its_lines_survive_reopening) {
  batch_row b = make_batch("alice", 50);
  {
    auto s = open();
    ASSERT_TRUE(s);
    s->batch_insert(b, make_lines(50));
    s->line_submitted(b.id, 0, 101);
    s->line_submitted(b.id, 1, 102);
    EXPECT_TRUE(s->line_finished(b.id, 0, line_state::completed, 200, R"({"id":"chatcmpl-101"})"));
    EXPECT_TRUE(s->line_finished(b.id, 2, line_state::failed, 400, R"({"error":{}})"));
  }
  auto s = open();  // as a restarted gateway
  ASSERT_TRUE(s);
  auto unfinished = s->batches_unfinished();
  ASSERT_EQ(unfinished.size(), 1u);
  const batch_row& r = unfinished[0];
  EXPECT_EQ(r.id, b.id);
  EXPECT_EQ(r.api_key, "sk-secret") << "needed to submit the rest as the caller";
  EXPECT_EQ(r.status, batch_status::in_progress);
  EXPECT_EQ(r.metadata_json, R"({"k":"v"})");
  EXPECT_EQ(r.expires_at, 1000 + 86400);
  EXPECT_EQ(r.total, 50u);
  EXPECT_EQ(r.completed, 1u);
  EXPECT_EQ(r.failed, 1u);

  auto lines = s->lines(b.id);
  ASSERT_EQ(lines.size(), 50u);
  EXPECT_EQ(lines[0].state, line_state::completed);
  EXPECT_EQ(lines[0].job_id, 101u);
  EXPECT_EQ(lines[0].status_code, 200);
  EXPECT_EQ(lines[0].result_json, R"({"id":"chatcmpl-101"})");
  EXPECT_EQ(lines[1].state, line_state::submitted) << "re-followed after a restart";
  EXPECT_EQ(lines[1].job_id, 102u);
  EXPECT_EQ(lines[2].state, line_state::failed);
  EXPECT_EQ(lines[3].state, line_state::pending) << "re-submitted (same request_key)";
  EXPECT_EQ(lines[3].job_id, 0u);
  EXPECT_EQ(lines[49].custom_id, "req-49");
  EXPECT_NE(lines[49].body.find("hi 49"), std::string::npos);
}

TEST_F(batch_store_test, a_line_is_counted_once) {
  auto s = open();
  ASSERT_TRUE(s);
  batch_row b = make_batch("alice", 3);
  s->batch_insert(b, make_lines(3));
  EXPECT_TRUE(s->line_finished(b.id, 1, line_state::completed, 200, "{}"));
  // The same job's job_done seen again (a re-follow after a broker restart).
  EXPECT_FALSE(s->line_finished(b.id, 1, line_state::completed, 200, "{}"));
  EXPECT_FALSE(s->line_finished(b.id, 1, line_state::failed, 500, "{}"));
  // A line of another batch, or past the end, changes nothing.
  EXPECT_FALSE(s->line_finished(b.id, 3, line_state::completed, 200, "{}"));
  EXPECT_FALSE(s->line_finished("batch_nope", 0, line_state::completed, 200, "{}"));
  // A late job id for a finished line does not reopen it.
  s->line_submitted(b.id, 1, 999);
  auto r = s->batch_get("alice", b.id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(r->failed, 0u);
  EXPECT_EQ(s->lines(b.id)[1].state, line_state::completed);
  EXPECT_THROW(s->line_finished(b.id, 0, line_state::pending, 0, ""), std::invalid_argument);
}

TEST_F(batch_store_test, cancelling_fails_the_lines_without_a_job_at_once) {
  auto s = open();
  ASSERT_TRUE(s);
  batch_row b = make_batch("alice", 5);
  s->batch_insert(b, make_lines(5));
  s->line_submitted(b.id, 0, 10);
  s->line_submitted(b.id, 1, 11);
  ASSERT_TRUE(s->line_finished(b.id, 1, line_state::completed, 200, "{}"));
  EXPECT_EQ(s->lines_fail_pending(b.id, R"({"code":"batch_cancelled"})"), 3u);
  EXPECT_EQ(s->lines_fail_pending(b.id, R"({"code":"batch_cancelled"})"), 0u);
  auto lines = s->lines(b.id);
  EXPECT_EQ(lines[0].state, line_state::submitted) << "its job is cancelled and followed";
  EXPECT_EQ(lines[1].state, line_state::completed) << "a finished line keeps its output";
  EXPECT_EQ(lines[2].state, line_state::failed);
  EXPECT_EQ(lines[2].status_code, 0);
  EXPECT_EQ(lines[4].result_json, R"({"code":"batch_cancelled"})");
  auto r = s->batch_get("alice", b.id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(r->failed, 3u);
}

TEST_F(batch_store_test, finishing_writes_files_and_forgets_the_api_key) {
  auto s = open();
  ASSERT_TRUE(s);
  batch_row b = make_batch("alice", 1);
  s->batch_insert(b, make_lines(1));
  ASSERT_TRUE(s->line_finished(b.id, 0, line_state::completed, 200, "{}"));
  b.completed = 1;
  b.status = batch_status::completed;
  b.finalizing_at = 2000;
  b.completed_at = 2001;
  file_row out{
      batch_store::new_id("file-"), "alice", b.id + "_output.jsonl", "batch_output", 0, 2001};
  b.output_file_id = out.id;
  s->batch_finish(b, {{out, "{\"custom_id\":\"req-0\"}\n"}});

  auto r = s->batch_get("alice", b.id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, batch_status::completed);
  EXPECT_EQ(r->api_key, "") << "a final batch keeps no secret";
  EXPECT_EQ(r->output_file_id, out.id);
  EXPECT_EQ(r->completed_at, 2001);
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(s->file_content("alice", out.id), "{\"custom_id\":\"req-0\"}\n");
  EXPECT_TRUE(s->batches_unfinished().empty());
  EXPECT_FALSE(s->batch_get("bob", b.id));
}

TEST_F(batch_store_test, batch_list_pages_and_counts_unfinished_per_owner) {
  auto s = open();
  ASSERT_TRUE(s);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    batch_row b = make_batch(i == 4 ? "bob" : "alice", 1);
    if (i == 0) b.status = batch_status::failed;
    s->batch_insert(b, make_lines(1));
    ids.push_back(b.id);
  }
  bool more = false;
  auto page = s->batch_list("alice", 2, "", more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_TRUE(more);
  EXPECT_EQ(page[0].id, ids[3]);
  EXPECT_EQ(page[1].id, ids[2]);
  page = s->batch_list("alice", 2, page.back().id, more);
  ASSERT_EQ(page.size(), 2u);
  EXPECT_FALSE(more);
  EXPECT_EQ(page[1].id, ids[0]);
  // Bob's id as a cursor of Alice's list tells nothing: the list starts over.
  page = s->batch_list("alice", 10, ids[4], more);
  EXPECT_EQ(page.size(), 4u);
  EXPECT_EQ(s->usage("alice").batches_unfinished, 3u);
  EXPECT_EQ(s->usage("bob").batches_unfinished, 1u);
}

TEST_F(batch_store_test, fifty_thousand_lines_in_one_insert) {
  auto s = open();
  ASSERT_TRUE(s);
  batch_row b = make_batch("alice", 50000);
  s->batch_insert(b, make_lines(50000));
  auto lines = s->lines(b.id);
  ASSERT_EQ(lines.size(), 50000u);
  EXPECT_EQ(lines[49999].custom_id, "req-49999");
}

}  // namespace
}  // namespace hearth::gateway
