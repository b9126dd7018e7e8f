#include "broker/job-store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "broker/counting-vfs.h"
#include "schema/codec.h"
#include "schema/samples.h"

namespace hearth::broker {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using wire::job_state;

// Each test gets its own directory of real SQLite files, removed afterwards.
class JobStore : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "hearth-job-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string path(const char* name = "jobs.db") const { return (dir_ / name).string(); }

  std::unique_ptr<job_store> open_store(const store_options& options = {}) {
    auto s = job_store::open(path(), options);
    if (!s) {
      ADD_FAILURE() << s.message();
      return nullptr;
    }
    return std::move(s).value();
  }

  fs::path dir_;
};

job_row sample_job(std::string model = "stories260K", std::string prompt = "Once upon a time") {
  job_row r;
  r.model = std::move(model);
  r.prompt = std::move(prompt);
  return r;
}

// A job of issue 56's API: tool calls and a tool message, every api_params field away from its
// default (schema/samples.h), a bias of -0 (its sign is kept) and a large tools text (it lives
// outside the jobs row).
job_row api_job() {
  job_row r = sample_job("qwen3", "");
  r.messages = wire::samples::conversation();
  r.params.api = wire::samples::params().api;
  r.params.api.logit_bias.push_back({7, -0.0f});
  r.params.api.tools += std::string(100000, ' ');
  return r;
}

// What the broker hands a node for `r` (job_table::assign copies these fields).
std::string assign_of(const job_row& r) {
  wire::job_assign a;
  a.job_id = r.id;
  a.attempt = 1;
  a.model = r.model;
  a.prompt = r.prompt;
  a.messages = r.messages;
  a.params = r.params;
  return wire::encode(a);
}

std::vector<std::string> event_names(job_store& s, uint64_t id) {
  std::vector<std::string> names;
  for (const auto& e : s.job_events(id)) names.push_back(e.event);
  return names;
}

// A job with a prompt, assigned to a node: the state in which output is appended.
job_row running_job(job_store& s, std::string prompt = "Once upon a time") {
  job_row r = sample_job("stories260K", std::move(prompt));
  s.insert_job(r, 1);
  s.job_assigned(r.id, 1, "n1", 2);
  return r;
}

// Output bytes that are not all ASCII: NULs, UTF-8 sequences (which chunk and page boundaries
// split), every byte value.
std::string output_bytes_pattern(size_t n, uint32_t seed) {
  std::string s;
  s.reserve(n);
  const std::string pieces[] = {"Once upon a time", " ünïcödé ", "\0"s, "🦙", "\xff\xfe", "\n"};
  uint32_t x = seed;
  while (s.size() < n) {
    x = x * 1664525u + 1013904223u;
    s += pieces[(x >> 16) % std::size(pieces)];
    s += static_cast<char>(x >> 24);
  }
  s.resize(n);
  return s;
}

// Waits (without asserting anything about time) for something the checkpointer does on its own
// thread; false if it has not happened after a minute.
template <typename F>
bool eventually(F done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// One value read on a connection of its own (the store's lock is a flock on the database, not a
// SQLite lock: plain connections still read).
std::string sql_value(const std::string& db_path, const char* sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  std::string v;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    v = t ? t : "";
  } else {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

TEST_F(JobStore, RoundTripsEveryField) {
  auto s = open_store();
  ASSERT_TRUE(s);
  job_row r;
  r.model = "qwen2.5-0.5b-instruct-q8_0";
  r.prompt = "a prompt with \0 a NUL, \x1f a unit separator and ünïcödé"s;
  r.messages = {{"system", "be brief"}, {"user", ""}, {"assistant", "line 1\nline 2: \x1f"}};
  r.params.max_tokens = 4096;
  r.params.temperature = 0.7f;
  r.params.top_k = 0;
  r.params.top_p = 0.9f;
  r.params.min_p = 0.125f;
  r.params.repeat_penalty = 1.1f;
  r.params.repeat_last_n = -1;
  r.params.seed = 0xFFFFFFFFFFFFFFFFull;
  r.params.presence_penalty = -1.5f;
  r.params.frequency_penalty = 0.25f;
  r.params.chat_template = "chatml";
  r.params.enable_thinking = false;
  r.params.show_thinking = true;
  r.params.stop = {"\n\n",
                   "",
                   "12:not:a:length",
                   "a\x1f"
                   "b",
                   "nul\0x"s,
                   "</s>"};
  r.priority = -3;
  r.node = "n1";
  r.attempts = 2;
  r.started_ms = 1700000000123;
  r.finished_ms = 1700000000456;
  r.n_prompt = 17;
  r.n_gen = 5;
  r.stop_reason = "max_tokens";
  r.error = "none";
  r.owner = "alice-key";
  r.request_key = "retry-7";
  uint64_t id = s->insert_job(r, 1700000000000);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(r.id, id);
  job_row plain_row = sample_job();
  EXPECT_EQ(s->insert_job(plain_row, 1), 2u);

  auto got = s->job(id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, id);
  EXPECT_EQ(got->model, r.model);
  EXPECT_EQ(got->prompt, r.prompt);
  ASSERT_EQ(got->messages.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got->messages[i].role, r.messages[i].role);
    EXPECT_EQ(got->messages[i].content, r.messages[i].content);
  }
  EXPECT_EQ(got->params.max_tokens, 4096);
  EXPECT_EQ(got->params.temperature, 0.7f);
  EXPECT_EQ(got->params.top_k, 0);
  EXPECT_EQ(got->params.top_p, 0.9f);
  EXPECT_EQ(got->params.min_p, 0.125f);
  EXPECT_EQ(got->params.repeat_penalty, 1.1f);
  EXPECT_EQ(got->params.repeat_last_n, -1);
  EXPECT_EQ(got->params.seed, 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(got->params.presence_penalty, -1.5f);
  EXPECT_EQ(got->params.frequency_penalty, 0.25f);
  EXPECT_EQ(got->params.chat_template, "chatml");
  EXPECT_FALSE(got->params.enable_thinking);
  EXPECT_TRUE(got->params.show_thinking);
  EXPECT_EQ(got->params.stop, r.params.stop);
  EXPECT_EQ(got->priority, -3);
  EXPECT_EQ(got->state, job_state::queued);
  EXPECT_EQ(got->node, "n1");
  EXPECT_EQ(got->attempts, 2u);
  EXPECT_EQ(got->created_ms, 1700000000000);
  EXPECT_EQ(got->started_ms, 1700000000123);
  EXPECT_EQ(got->finished_ms, 1700000000456);
  EXPECT_EQ(got->n_prompt, 17u);
  EXPECT_EQ(got->n_gen, 5u);
  EXPECT_EQ(got->stop_reason, "max_tokens");
  EXPECT_EQ(got->error, "none");
  EXPECT_EQ(got->output_bytes, 0u);
  EXPECT_EQ(got->owner, "alice-key");
  EXPECT_EQ(got->request_key, "retry-7");

  auto plain = s->job(2);
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->messages.empty());
  EXPECT_TRUE(plain->params.stop.empty());
  EXPECT_EQ(plain->params.seed, 0u);
  EXPECT_FALSE(s->job(3));
}

TEST_F(JobStore, RecordsTheLifecycleAsEvents) {
  auto s = open_store();
  ASSERT_TRUE(s);
  job_row r = sample_job();
  uint64_t id = s->insert_job(r, 100);
  s->job_assigned(id, 1, "n1", 110);
  EXPECT_EQ(s->job(id)->state, job_state::running);
  s->job_started(id, 1, "n1", 9, 120);
  s->append_output(id, 0, "Once there", 2);
  EXPECT_EQ(s->read_output(id, 0, 100), "Once there");
  EXPECT_EQ(s->job(id)->n_gen, 2u);
  EXPECT_EQ(s->job(id)->output_bytes, 10u);
  s->job_requeued(id, 1, "n1", "node lost", 130);
  auto q = s->job(id);
  EXPECT_EQ(q->state, job_state::queued);
  EXPECT_EQ(q->output_bytes, 0u);
  EXPECT_EQ(s->read_output(id, 0, 100), "");
  EXPECT_EQ(q->n_gen, 0u);
  EXPECT_EQ(q->attempts, 1u);
  s->job_assigned(id, 2, "n2", 140);
  s->job_started(id, 2, "n2", 9, 150);
  s->append_output(id, 0, "Once there was", 4);
  s->job_finished(id, 2, "n2", job_state::completed, "max_tokens", "", 9, 4, 160);
  // A batch that arrives after the final must not change the final output.
  s->append_output(id, 14, " late", 5);

  auto done = s->job(id);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, job_state::completed);
  EXPECT_EQ(done->attempts, 2u);
  EXPECT_EQ(done->node, "n2");
  EXPECT_EQ(done->started_ms, 150);
  EXPECT_EQ(done->finished_ms, 160);
  EXPECT_EQ(done->n_prompt, 9u);
  EXPECT_EQ(done->n_gen, 4u);
  EXPECT_EQ(done->stop_reason, "max_tokens");
  EXPECT_EQ(done->output_bytes, 14u);
  EXPECT_EQ(s->read_output(id, 0, 100), "Once there was");

  auto events = s->job_events(id);
  std::vector<std::string> want = {"queued",   "assigned", "started",  "requeued",
                                   "assigned", "started",  "completed"};
  ASSERT_EQ(event_names(*s, id), want);
  std::vector<int64_t> times = {100, 110, 120, 130, 140, 150, 160};
  std::vector<uint32_t> attempts = {0, 1, 1, 1, 2, 2, 2};
  std::vector<std::string> nodes = {"", "n1", "n1", "n1", "n2", "n2", "n2"};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].time_ms, times[i]) << i;
    EXPECT_EQ(events[i].attempt, attempts[i]) << i;
    EXPECT_EQ(events[i].node, nodes[i]) << i;
  }
  EXPECT_EQ(events[3].detail, "node lost");
  EXPECT_EQ(events[6].detail, "max_tokens");
  EXPECT_TRUE(s->job_events(id + 1).empty());
}

TEST_F(JobStore, FinishedEventIsNamedByTheFinalState) {
  auto s = open_store();
  ASSERT_TRUE(s);
  job_row a = sample_job(), b = sample_job();
  s->insert_job(a, 1);
  s->insert_job(b, 2);
  s->job_assigned(a.id, 1, "n1", 3);
  s->job_finished(a.id, 1, "n1", job_state::failed, "", "out of memory", 0, 0, 4);
  // A queued job cancelled before any attempt: no node given, none recorded.
  s->job_finished(b.id, 0, "", job_state::cancelled, "cancelled", "", 0, 0, 5);
  EXPECT_EQ(event_names(*s, a.id), (std::vector<std::string>{"queued", "assigned", "failed"}));
  EXPECT_EQ(s->job_events(a.id).back().detail, "out of memory");
  EXPECT_EQ(s->job(a.id)->error, "out of memory");
  EXPECT_EQ(s->job(a.id)->node, "n1");
  EXPECT_EQ(event_names(*s, b.id), (std::vector<std::string>{"queued", "cancelled"}));
  EXPECT_EQ(s->job(b.id)->state, job_state::cancelled);
  EXPECT_EQ(s->job(b.id)->node, "");
  EXPECT_THROW(s->job_finished(a.id, 1, "n1", job_state::running, "", "", 0, 0, 6),
               std::invalid_argument);
}

TEST_F(JobStore, ChangesToAnUnknownJobThrow) {
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_THROW(s->job_assigned(7, 1, "n1", 1), std::runtime_error);
  EXPECT_THROW(s->job_started(7, 1, "n1", 3, 1), std::runtime_error);
  EXPECT_THROW(s->job_requeued(7, 1, "n1", "x", 1), std::runtime_error);
  EXPECT_THROW(s->job_finished(7, 1, "n1", job_state::completed, "", "", 0, 0, 1),
               std::runtime_error);
  EXPECT_TRUE(s->job_events(7).empty());
  // The store stays usable, in and out of transactions.
  s->begin();
  EXPECT_THROW(s->job_assigned(7, 1, "n1", 1), std::runtime_error);
  job_row r = sample_job();
  s->insert_job(r, 1);
  s->commit();
  EXPECT_EQ(s->job_count(), 1u);
  EXPECT_THROW(s->commit(), std::runtime_error);  // no transaction open
}

TEST_F(JobStore, ListsNewestFirstWithFiltersAndLimit) {
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->jobs({}).empty());
  EXPECT_EQ(s->job_count(), 0u);
  // ids 1..10: odd ids model "a", even "b"; 1-3 completed, 4-5 running, the rest queued.
  s->begin();
  for (int i = 1; i <= 10; ++i) {
    job_row r = sample_job(i % 2 ? "a" : "b");
    r.messages = {{"user", "hello " + std::to_string(i)}};
    s->insert_job(r, i);
    if (i <= 5) s->job_assigned(r.id, 1, "n1", i);
    if (i <= 3) s->job_finished(r.id, 1, "n1", job_state::completed, "eog", "", 1, 1, i);
  }
  s->commit();
  EXPECT_EQ(s->job_count(), 10u);

  auto ids = [](const std::vector<job_row>& rows) {
    std::vector<uint64_t> v;
    for (const auto& r : rows) v.push_back(r.id);
    return v;
  };
  auto all = s->jobs({});
  EXPECT_EQ(ids(all), (std::vector<uint64_t>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}));
  for (const auto& r : all) {  // summaries: no prompt, no messages
    EXPECT_EQ(r.prompt, "") << r.id;
    EXPECT_TRUE(r.messages.empty()) << r.id;
  }
  EXPECT_EQ(ids(s->jobs({.limit = 3})), (std::vector<uint64_t>{10, 9, 8}));
  EXPECT_EQ(ids(s->jobs({.limit = 0})), std::vector<uint64_t>{});
  EXPECT_EQ(ids(s->jobs({.model = "a"})), (std::vector<uint64_t>{9, 7, 5, 3, 1}));
  EXPECT_EQ(ids(s->jobs({.state = job_state::running})), (std::vector<uint64_t>{5, 4}));
  EXPECT_EQ(ids(s->jobs({.state = job_state::completed, .model = "b", .limit = 5})),
            std::vector<uint64_t>{2});
  EXPECT_EQ(ids(s->jobs({.state = job_state::queued, .model = "a", .limit = 2})),
            (std::vector<uint64_t>{9, 7}));
  EXPECT_TRUE(s->jobs({.state = job_state::failed}).empty());
  EXPECT_TRUE(s->jobs({.model = "c"}).empty());

  auto unfinished = s->unfinished_jobs();
  EXPECT_EQ(ids(unfinished), (std::vector<uint64_t>{4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(unfinished[0].state, job_state::running);
  EXPECT_EQ(unfinished[0].messages.size(), 1u);
  EXPECT_EQ(unfinished[2].state, job_state::queued);
  EXPECT_EQ(unfinished[2].messages[0].content, "hello 6");  // a restarted broker gets it all
  EXPECT_EQ(unfinished[2].prompt, "Once upon a time");
}

TEST_F(JobStore, UsesWalAndRecordsTheSchemaVersion) {
  { ASSERT_TRUE(open_store()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
  auto pragma = [db](const char* sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    std::string v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
  };
  EXPECT_EQ(pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma("PRAGMA user_version"), "8");
  EXPECT_EQ(pragma("PRAGMA auto_vacuum"), "2");  // incremental: prune() can shrink the file
  EXPECT_EQ(pragma("PRAGMA application_id"), std::to_string(0x48525448));
  sqlite3_close(db);
}

TEST_F(JobStore, CommittedTransactionSurvivesReopen) {
  {
    auto s = open_store();
    ASSERT_TRUE(s);
    s->begin();
    job_row r = sample_job();
    s->insert_job(r, 1);
    s->job_assigned(r.id, 1, "n1", 2);
    s->commit();
    job_row outside = sample_job("other");  // autocommit, no begin()
    s->insert_job(outside, 3);
  }
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->job_count(), 2u);
  EXPECT_EQ(s->job(1)->state, job_state::running);
  EXPECT_EQ(s->job(2)->model, "other");
  EXPECT_EQ(event_names(*s, 1), (std::vector<std::string>{"queued", "assigned"}));
}

TEST_F(JobStore, UncommittedTransactionIsLostWhenTheStoreIsDestroyed) {
  {
    auto s = open_store();
    ASSERT_TRUE(s);
    job_row kept = sample_job("kept");
    s->insert_job(kept, 1);
    s->begin();
    job_row lost = sample_job("lost");
    s->insert_job(lost, 2);
    s->job_assigned(kept.id, 1, "n1", 3);
  }
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->job_count(), 1u);
  EXPECT_EQ(s->job(1)->model, "kept");
  EXPECT_EQ(s->job(1)->state, job_state::queued);
  EXPECT_EQ(event_names(*s, 1), std::vector<std::string>{"queued"});
}

TEST_F(JobStore, CommittedJobSurvivesSigkill) {
  // No connection may be open across fork(): the child opens its own and dies holding it.
  pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    auto s = job_store::open(path());
    if (!s) _exit(2);
    (*s)->begin();
    job_row r = sample_job("survivor");
    (*s)->insert_job(r, 42);
    (*s)->job_assigned(r.id, 1, "n1", 43);
    (*s)->commit();
    (*s)->begin();
    job_row lost = sample_job("in flight");
    (*s)->insert_job(lost, 44);
    raise(SIGKILL);
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(fs::exists(path("jobs.db-wal")));  // the commit lives in the WAL, not yet merged

  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->job_count(), 1u);
  auto r = s->job(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->model, "survivor");
  EXPECT_EQ(r->state, job_state::running);
  EXPECT_EQ(r->created_ms, 42);
  EXPECT_EQ(event_names(*s, 1), (std::vector<std::string>{"queued", "assigned"}));
}

TEST_F(JobStore, RejectsAFileThatIsNotSqlite) {
  {
    std::ofstream f(path("garbage.db"), std::ios::binary);
    for (int i = 0; i < 8192; ++i) f.put(static_cast<char>((i * 7919) % 251));
  }
  auto s = job_store::open(path("garbage.db"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(path("garbage.db")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not a database"), std::string::npos) << s.message();
  EXPECT_EQ(fs::file_size(path("garbage.db")), 8192u);  // left as it was

  {
    std::ofstream f(path("short.db"), std::ios::binary);
    f << "hello";
  }
  auto t = job_store::open(path("short.db"));
  ASSERT_FALSE(t);
  EXPECT_NE(t.message().find(path("short.db")), std::string::npos) << t.message();
}

TEST_F(JobStore, RejectsAMissingDirectory) {
  std::string p = path("no-such-dir/jobs.db");
  auto s = job_store::open(p);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(path("no-such-dir")));
}

TEST_F(JobStore, RejectsAnotherApplicationsDatabase) {
  auto make = [](const std::string& p, const char* sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  make(path("other.db"), "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)");
  auto a = job_store::open(path("other.db"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.message().find(path("other.db")), std::string::npos) << a.message();
  EXPECT_NE(a.message().find("not a hearth database"), std::string::npos) << a.message();

  make(path("foreign.db"), "PRAGMA application_id = 1234");
  auto b = job_store::open(path("foreign.db"));
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("application_id 0x000004d2"), std::string::npos) << b.message();

  { ASSERT_TRUE(open_store()); }
  make(path(), "PRAGMA user_version = 9");
  auto c = job_store::open(path());
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("schema version 9"), std::string::npos) << c.message();
}

// The layout of version 1 (before owners and node keys), as a broker of that version made it.
constexpr const char* schema_v1 = R"sql(
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
  prompt TEXT NOT NULL,
  output TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_model ON jobs(model);
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
  memory_available INTEGER NOT NULL
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

TEST_F(JobStore, UpgradesAVersion1FileInPlace) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    for (const char* sql :
         {schema_v1, "PRAGMA application_id = 1213355080", "PRAGMA user_version = 1",
          "INSERT INTO jobs VALUES (1, 'm', 0, 'completed', 'n1', 1, 10, 11, 12, 3, 4, "
          "'max_tokens', '', 4, 0.0, 40, 0.9, 0.05, 1.1, 64, 7, '', 'old prompt', 'old output')",
          "INSERT INTO nodes VALUES ('n1', 'h', 'cpu', 0, 5, 2, 'cpu', 4, 8, 8)"}) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
  }
  auto s = open_store();
  ASSERT_TRUE(s);
  auto old = s->job(1);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->prompt, "old prompt");
  EXPECT_EQ(old->output_bytes, 10u);
  EXPECT_EQ(s->read_output(1, 0, 100), "old output");
  EXPECT_EQ(old->owner, "");
  ASSERT_EQ(s->nodes().size(), 1u);
  EXPECT_EQ(s->nodes()[0].key, "");
  job_row r;
  r.model = "m";
  r.prompt = "new";
  r.owner = "alice-key";
  const uint64_t id = s->insert_job(r, 20);
  EXPECT_EQ(id, 2u);
  job_filter mine;
  mine.owner = "alice-key";
  auto rows = s->jobs(mine);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, 2u);
  s.reset();
  // Reopening an upgraded file is a plain open.
  EXPECT_TRUE(open_store());
}

// The layout of version 2 (prompt and output in the job's row), as a broker of that version made
// it.
constexpr const char* schema_v2 = R"sql(
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

// Runs `sql` with `args` bound as text (any bytes, NULs included), as the version-2 broker did.
void exec_bound(sqlite3* db, const char* sql, std::initializer_list<std::string_view> args) {
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  int i = 0;
  for (auto a : args) sqlite3_bind_text64(st, ++i, a.data(), a.size(), SQLITE_STATIC, SQLITE_UTF8);
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE) << sql << ": " << sqlite3_errmsg(db);
  sqlite3_finalize(st);
}

TEST_F(JobStore, UpgradesAVersion2FileInPlace) {
  // Outputs that cross the migration's 64 KiB chunks, with NULs and split UTF-8 in them.
  const std::string done_output = output_bytes_pattern(200000, 5);
  const std::string running_output = output_bytes_pattern(65536, 6);
  const std::string prompt = "a prompt with \0 a NUL and ünïcödé"s;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    for (const char* sql : {"PRAGMA journal_mode=WAL", schema_v2,
                            "PRAGMA application_id = 1213355080", "PRAGMA user_version = 2"}) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    }
    const char* insert =
        "INSERT INTO jobs (id, model, priority, state, node, attempts, created_ms, started_ms, "
        "finished_ms, n_prompt, n_gen, stop_reason, error, max_tokens, temperature, top_k, top_p, "
        "min_p, repeat_penalty, repeat_last_n, seed, stop, owner, prompt, output) VALUES "
        "(?1, 'm', 0, ?2, 'n1', 1, 10, 11, 12, 3, 4, 'max_tokens', '', 4, 0.5, 40, 0.9, 0.05, "
        "1.1, 64, 7, '2:\n\n', ?3, ?4, ?5)";
    exec_bound(db, insert, {"1", "completed", "alice", prompt, done_output});
    exec_bound(db, insert, {"2", "running", "alice", "second", running_output});
    exec_bound(db, insert, {"5", "queued", "", "third", ""});
    for (const char* sql :
         {"INSERT INTO job_messages VALUES (5, 0, 'system', 'be brief'), (5, 1, 'user', 'hi')",
          "INSERT INTO job_events (job_id, time_ms, event, attempt, node, detail) VALUES "
          "(1, 10, 'queued', 0, '', ''), (1, 11, 'assigned', 1, 'n1', ''), "
          "(1, 12, 'completed', 1, 'n1', 'max_tokens')",
          // Jobs 6 and 7 existed and were deleted: their ids are never given again.
          "UPDATE sqlite_sequence SET seq = 7 WHERE name = 'jobs'",
          "INSERT INTO nodes VALUES ('n1', 'h', 'cpu', 0, 5, 2, 'cpu', 4, 8, 8, 'node-key')",
          "INSERT INTO models_seen VALUES ('m')"}) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
  }
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(sql_value(path(), "PRAGMA user_version"), "8");
  EXPECT_EQ(sql_value(path(), "PRAGMA auto_vacuum"), "2");
  EXPECT_EQ(sql_value(path(),
                      "SELECT count(*) FROM pragma_table_info('jobs') WHERE name IN "
                      "('prompt', 'output')"),
            "0");
  EXPECT_EQ(sql_value(path(), "SELECT count(*) FROM pragma_foreign_key_check"), "0");

  auto done = s->job(1);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->prompt, prompt);
  EXPECT_EQ(done->state, job_state::completed);
  EXPECT_EQ(done->owner, "alice");
  EXPECT_EQ(done->params.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(done->output_bytes, done_output.size());
  EXPECT_TRUE(s->read_output(1, 0, UINT64_MAX) == done_output);
  EXPECT_TRUE(s->read_output(1, 65530, 70000) == done_output.substr(65530, 70000));
  EXPECT_EQ(event_names(*s, 1), (std::vector<std::string>{"queued", "assigned", "completed"}));

  auto running = s->job(2);
  ASSERT_TRUE(running);
  EXPECT_EQ(running->prompt, "second");
  EXPECT_EQ(running->output_bytes, running_output.size());
  EXPECT_TRUE(s->read_output(2, 0, UINT64_MAX) == running_output);
  s->append_output(2, running_output.size(), "more", 5);  // the stream goes on
  EXPECT_TRUE(s->read_output(2, 0, UINT64_MAX) == running_output + "more");

  auto queued = s->job(5);
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->output_bytes, 0u);
  ASSERT_EQ(queued->messages.size(), 2u);
  EXPECT_EQ(queued->messages[1].content, "hi");
  EXPECT_EQ(s->unfinished_jobs().size(), 2u);

  ASSERT_EQ(s->nodes().size(), 1u);
  EXPECT_EQ(s->nodes()[0].key, "node-key");
  EXPECT_EQ(s->known_models(), std::vector<std::string>{"m"});

  job_row r = sample_job();
  r.owner = "alice";
  r.request_key = "k";
  EXPECT_EQ(s->insert_job(r, 20), 8u);
  EXPECT_EQ(s->job_by_request_key("alice", "k"), 8u);
  s.reset();
  s = open_store();  // reopening an upgraded file is a plain open
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->read_output(1, 0, UINT64_MAX) == done_output);
}

// The layout of version 3 (before API keys and the OpenAI penalties), as a broker of that
// version made it.
constexpr const char* schema_v3 = R"sql(
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
  request_key TEXT NOT NULL DEFAULT ''  -- the submit's idempotency key; '' = none
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

TEST_F(JobStore, UpgradesAVersion3FileInPlace) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    for (const char* sql :
         {"PRAGMA auto_vacuum=INCREMENTAL", "PRAGMA journal_mode=WAL", schema_v3,
          "PRAGMA application_id = 1213355080", "PRAGMA user_version = 3",
          "INSERT INTO jobs (id, model, priority, state, node, attempts, created_ms, started_ms, "
          "finished_ms, n_prompt, n_gen, stop_reason, error, max_tokens, temperature, top_k, "
          "top_p, min_p, repeat_penalty, repeat_last_n, seed, stop, owner, output_bytes, "
          "request_key) VALUES (1, 'm', 2, 'completed', 'n1', 1, 10, 11, 12, 3, 4, 'max_tokens', "
          "'', 4, 0.5, 40, 0.9, 0.05, 1.1, 64, 7, '2:\n\n', 'alice', 5, 'k1'), "
          "(2, 'm', 0, 'queued', '', 0, 20, 0, 0, 0, 0, '', '', 8, 0, 0, 1, 0, 1, 64, 9, '', "
          "'alice', 0, '')",
          "INSERT INTO job_prompts VALUES (1, 'first'), (2, 'second')",
          "INSERT INTO job_output (job_id, byte_offset, data) VALUES (1, 0, CAST('hello' AS BLOB))",
          "INSERT INTO job_events (job_id, time_ms, event, attempt, node, detail) VALUES "
          "(1, 10, 'queued', 0, '', ''), (1, 12, 'completed', 1, 'n1', 'max_tokens')",
          "INSERT INTO nodes VALUES ('n1', 'h', 'cpu', 0, 5, 2, 'cpu', 4, 8, 8, 'node-key')",
          "INSERT INTO models_seen VALUES ('m')"}) {
      ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    }
    sqlite3_close(db);
  }
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(sql_value(path(), "PRAGMA user_version"), "8");
  EXPECT_EQ(sql_value(path(), "SELECT count(*) FROM pragma_foreign_key_check"), "0");
  auto done = s->job(1);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->prompt, "first");
  EXPECT_EQ(done->owner, "alice");
  EXPECT_EQ(done->request_key, "k1");
  EXPECT_EQ(done->params.seed, 7u);
  EXPECT_EQ(done->params.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(done->params.presence_penalty, 0);  // a job from before the penalties had none
  EXPECT_EQ(done->params.chat_template, "");    // ... nor a template named
  EXPECT_TRUE(done->params.enable_thinking);    // ... thinking as the model does it
  EXPECT_FALSE(done->params.show_thinking);
  EXPECT_EQ(done->params.frequency_penalty, 0);
  EXPECT_EQ(s->read_output(1, 0, 100), "hello");
  EXPECT_EQ(event_names(*s, 1), (std::vector<std::string>{"queued", "completed"}));
  EXPECT_EQ(s->unfinished_jobs().size(), 1u);
  EXPECT_EQ(s->job_by_request_key("alice", "k1"), 1u);
  ASSERT_EQ(s->nodes().size(), 1u);
  EXPECT_EQ(s->known_models(), std::vector<std::string>{"m"});
  EXPECT_TRUE(s->api_keys().empty());

  // The new columns and table work in the upgraded file, and survive reopening it.
  job_row r = sample_job();
  r.params.presence_penalty = 0.5f;
  r.params.frequency_penalty = -2;
  r.params.chat_template = "gemma";
  EXPECT_EQ(s->insert_job(r, 30), 3u);
  job_row api = api_job();  // the tables and columns of version 8
  EXPECT_EQ(s->insert_job(api, 31), 4u);
  s->api_key_insert({"0123456789ab", "ci", std::string(64, 'f'), "hk_AbCdE", 40, 0, 0});
  s.reset();
  s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(assign_of(*s->job(4)), assign_of(api));
  auto got = s->job(3);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->params.presence_penalty, 0.5f);
  EXPECT_EQ(got->params.frequency_penalty, -2.0f);
  EXPECT_EQ(got->params.chat_template, "gemma");
  ASSERT_EQ(s->api_keys().size(), 1u);
  EXPECT_EQ(s->api_keys()[0].name, "ci");
}

TEST_F(JobStore, ApiKeysRoundTripAndANameIsUniqueAmongKeysInForce) {
  auto s = open_store();
  ASSERT_TRUE(s);
  const api_key_record a{"aaaaaaaaaaaa", "ci", std::string(64, 'a'), "hk_aaaaa", 100, 0, 0};
  s->api_key_insert(a);
  // The same name again while the first is in force: refused, and nothing of it kept.
  const api_key_record a2{"bbbbbbbbbbbb", "ci", std::string(64, 'b'), "hk_bbbbb", 200, 0, 0, true};
  EXPECT_THROW(s->api_key_insert(a2), store_error);
  // The same secret (hash) under another name: refused too.
  EXPECT_THROW(s->api_key_insert({"cccccccccccc", "other", a.hash, "hk_aaaaa", 200, 0, 0}),
               store_error);
  s->api_key_used("aaaaaaaaaaaa", 150);
  s->api_key_revoke("aaaaaaaaaaaa", 300);
  s->api_key_revoke("aaaaaaaaaaaa", 400);  // revoking again keeps the first revocation
  s->api_key_insert(a2);                   // the name is free once the first is revoked
  auto keys = s->api_keys();
  ASSERT_EQ(keys.size(), 2u);
  std::sort(keys.begin(), keys.end(), [](auto& x, auto& y) { return x.id < y.id; });
  EXPECT_EQ(keys[0].id, "aaaaaaaaaaaa");
  EXPECT_EQ(keys[0].name, "ci");
  EXPECT_EQ(keys[0].hash, a.hash);
  EXPECT_EQ(keys[0].prefix, "hk_aaaaa");
  EXPECT_EQ(keys[0].created_ms, 100);
  EXPECT_EQ(keys[0].last_used_ms, 150);
  EXPECT_EQ(keys[0].revoked_ms, 300);
  EXPECT_FALSE(keys[0].admin);
  EXPECT_EQ(keys[1].id, "bbbbbbbbbbbb");
  EXPECT_EQ(keys[1].revoked_ms, 0);
  EXPECT_TRUE(keys[1].admin);
  // Inside a turn's transaction a key is undone with the rest of the turn.
  s->begin();
  s->api_key_insert({"dddddddddddd", "later", std::string(64, 'd'), "hk_ddddd", 500, 0, 0});
  s->rollback();
  EXPECT_EQ(s->api_keys().size(), 2u);
}

TEST_F(JobStore, NodesKeepTheLatestUpsertAndEveryModelName) {
  auto s = open_store();
  ASSERT_TRUE(s);
  wire::node_summary n;
  n.name = "gpu-box";
  n.hostname = "gpu-box.lan";
  n.engine = "cpu";
  n.online = true;
  n.last_seen_ms = 1000;
  n.slots = 2;
  n.running = 5;  // live data: not stored
  n.hardware = {"Ryzen 9", 32, 0xFFFFFFFFFFFFFFF0ull, 1ull << 35, {}};
  n.hardware.gpus = {{"vulkan", "RX 7900", 24ull << 30, 20ull << 30}, {"cuda", "RTX 3090", 1, 0}};
  n.models = {{"llama-3.2-1b-q8_0", "llama", "Q8_0", 1ull << 31, 131072, true},
              {"stories260K", "llama", "F32", 1 << 20, 512, false}};
  s->node_upsert(n);
  wire::node_summary m;
  m.name = "a-laptop";
  m.engine = "null";
  s->node_upsert(m);

  auto got = s->nodes();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "a-laptop");
  EXPECT_TRUE(got[0].models.empty());
  const auto& g = got[1];
  EXPECT_EQ(g.name, "gpu-box");
  EXPECT_EQ(g.hostname, "gpu-box.lan");
  EXPECT_EQ(g.engine, "cpu");
  EXPECT_TRUE(g.online);
  EXPECT_EQ(g.last_seen_ms, 1000);
  EXPECT_EQ(g.slots, 2u);
  EXPECT_EQ(g.running, 0u);
  EXPECT_EQ(g.hardware.cpu_model, "Ryzen 9");
  EXPECT_EQ(g.hardware.cpu_threads, 32u);
  EXPECT_EQ(g.hardware.memory_total, 0xFFFFFFFFFFFFFFF0ull);
  EXPECT_EQ(g.hardware.memory_available, 1ull << 35);
  ASSERT_EQ(g.hardware.gpus.size(), 2u);
  EXPECT_EQ(g.hardware.gpus[0].name, "RX 7900");
  EXPECT_EQ(g.hardware.gpus[0].memory_free, 20ull << 30);
  EXPECT_EQ(g.hardware.gpus[1].backend, "cuda");
  ASSERT_EQ(g.models.size(), 2u);
  EXPECT_EQ(g.models[0].name, "llama-3.2-1b-q8_0");
  EXPECT_EQ(g.models[0].quantization, "Q8_0");
  EXPECT_EQ(g.models[0].size_bytes, 1ull << 31);
  EXPECT_EQ(g.models[0].context_length, 131072u);
  EXPECT_TRUE(g.models[0].loaded);
  EXPECT_FALSE(g.models[1].loaded);

  // The node comes back with one model and no GPU left.
  n.hostname = "gpu-box.home";
  n.hardware.gpus.clear();
  n.models = {{"qwen2-0.5b", "qwen2", "Q4_0", 400 << 20, 32768, true}};
  s->node_upsert(n);
  got = s->nodes();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].hostname, "gpu-box.home");
  EXPECT_TRUE(got[1].hardware.gpus.empty());
  ASSERT_EQ(got[1].models.size(), 1u);
  EXPECT_EQ(got[1].models[0].name, "qwen2-0.5b");
  EXPECT_EQ(s->known_models(),
            (std::vector<std::string>{"llama-3.2-1b-q8_0", "qwen2-0.5b", "stories260K"}));

  s->node_seen("gpu-box", false, 5000);
  s->node_seen("never-said-hello", true, 6000);  // nothing to update
  got = s->nodes();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[1].online);
  EXPECT_EQ(got[1].last_seen_ms, 5000);
  EXPECT_EQ(got[1].models.size(), 1u);
  EXPECT_EQ(s->known_models().size(), 3u);  // an offline node's models stay known
}

TEST_F(JobStore, FullDurabilitySyncsTheWalBeforeCommitReturns) {
  counting_vfs vfs;  // the default VFS while it lives: the store's connections go through it
  auto& mine = counting_vfs::this_thread();
  for (auto sync : {store_options::durability::full, store_options::durability::normal}) {
    const bool full = sync == store_options::durability::full;
    SCOPED_TRACE(full ? "full" : "normal");
    auto s = job_store::open(path(full ? "full.db" : "normal.db"), {.sync = sync});
    ASSERT_TRUE(s) << s.message();
    for (int i = 0; i < 20; ++i) {
      (*s)->begin();
      job_row r = sample_job();
      (*s)->insert_job(r, i);
      const uint64_t before = mine.wal_syncs;
      (*s)->commit();
      // Counted on this thread only: the checkpointer's syncs happen on its own.
      if (full) {
        EXPECT_GE(mine.wal_syncs - before, 1u) << "commit " << i;
      } else {
        EXPECT_EQ(mine.wal_syncs - before, 0u) << "commit " << i;
      }
    }
  }
}

TEST_F(JobStore, AppendingOutputWritesTheNewBytesNotTheJobsRow) {
  // Finding 3: with the output and prompt in the job's row, every flush rewrote both.
  counting_vfs vfs;
  auto s = open_store({.sync = store_options::durability::normal});
  ASSERT_TRUE(s);
  const std::string prompt = output_bytes_pattern(1 << 20, 1);
  job_row r = running_job(*s, prompt);
  const std::string piece(1024, 'o');
  const int appends = 200;
  auto& mine = counting_vfs::this_thread();
  const uint64_t before = mine.wal_bytes_written;
  for (int i = 0; i < appends; ++i) {
    s->begin();
    s->append_output(r.id, uint64_t(i) * piece.size(), piece, uint32_t(i + 1));
    s->commit();
  }
  const uint64_t per_append = (mine.wal_bytes_written - before) / appends;
  std::printf(
      "[ wal      ] %d appends of 1 KiB to a job with a 1 MiB prompt: %llu WAL bytes each\n",
      appends, static_cast<unsigned long long>(per_append));
  // A commit writes the pages it changed, each a 4 KiB frame: the job's leaf page, the chunk's
  // table and index pages, now and then a parent. Eight is generous; the prompt is 256 pages.
  EXPECT_LE(per_append, 8u * (4096 + 24)) << "bytes written to the WAL per 1 KiB append";
  EXPECT_EQ(s->read_output(r.id, 0, 1 << 20), std::string(appends * piece.size(), 'o'));
  EXPECT_EQ(s->job(r.id)->prompt, prompt);
  EXPECT_EQ(s->job(r.id)->n_gen, uint32_t(appends));
}

TEST_F(JobStore, OutputOver8MiBReadsBackWholeInPages) {
  // Finding 4: an output over 4 MiB could be stored but never read back.
  auto s = open_store({.sync = store_options::durability::normal});
  ASSERT_TRUE(s);
  job_row r = running_job(*s);
  const std::string output = output_bytes_pattern((8 << 20) + 12345, 2);
  // Pieces of uneven sizes, as a broker flushes them.
  uint64_t at = 0;
  for (size_t n = 1; at < output.size(); n = n * 7 % 200000 + 1) {
    const size_t len = std::min<size_t>(n, output.size() - at);
    s->begin();
    s->append_output(r.id, at, std::string_view(output).substr(at, len), uint32_t(at / 4));
    s->commit();
    at += len;
  }
  s->job_finished(r.id, 1, "n1", job_state::completed, "eog", "", 5, uint32_t(at / 4), 9);
  EXPECT_EQ(s->job(r.id)->output_bytes, output.size());

  for (uint64_t page : {uint64_t(1) << 20, uint64_t(300001), uint64_t(4096)}) {
    std::string read;
    for (uint64_t off = 0;; off += page) {
      std::string p = s->read_output(r.id, off, page);
      ASSERT_LE(p.size(), page);
      if (p.empty()) break;
      read += p;
    }
    EXPECT_EQ(read.size(), output.size()) << "pages of " << page;
    EXPECT_TRUE(read == output) << "pages of " << page;
  }
  EXPECT_TRUE(s->read_output(r.id, 0, UINT64_MAX) == output);
  EXPECT_EQ(s->read_output(r.id, output.size() - 3, 100), output.substr(output.size() - 3));
  EXPECT_EQ(s->read_output(r.id, output.size(), 100), "");
  EXPECT_EQ(s->read_output(r.id, UINT64_MAX, UINT64_MAX), "");
  EXPECT_EQ(s->read_output(r.id + 1, 0, 100), "");
  // A chunk is never rewritten: an append at another offset than the stored size is a bug.
  job_row other = running_job(*s);
  s->append_output(other.id, 0, "abc", 1);
  EXPECT_THROW(s->append_output(other.id, 2, "x", 2), std::invalid_argument);
  EXPECT_THROW(s->append_output(other.id, 4, "x", 2), std::invalid_argument);
  EXPECT_EQ(s->read_output(other.id, 0, 100), "abc");

  s.reset();
  s = open_store();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->read_output(r.id, 0, UINT64_MAX) == output);
}

TEST_F(JobStore, WalStaysBoundedWhileAJobStreamsAndIsTruncatedWhenIdle) {
  // Finding 1: the checkpointer did nothing; the WAL grew without end while the database file
  // stayed at 4 KiB.
  const uint64_t limit = 1 << 20;
  auto s = open_store({.wal_limit_bytes = limit});  // durability::full, as a broker runs
  ASSERT_TRUE(s);
  job_row r = running_job(*s);
  const std::string piece = output_bytes_pattern(64 << 10, 3);
  const int commits = 1600;  // 100 MiB
  // What wal-checkpointer.h promises: never more than four times the limit, plus the transaction
  // that crossed it. One transaction here: 64 KiB of output in at most 17 overflow pages, plus
  // at most 5 pages (a leaf, and on a split a new leaf and parents, and page 1) in each of the
  // three b-trees it touches (the jobs row, the chunk, the chunk's index): 32 frames of a 4 KiB
  // page and its 24-byte header.
  const uint64_t bound = 4 * limit + 32 * (4096 + 24);
  uint64_t peak = 0;
  for (int i = 0; i < commits; ++i) {
    s->begin();
    s->append_output(r.id, uint64_t(i) * piece.size(), piece, uint32_t(i));
    s->commit();
    const uint64_t wal = s->stats().wal_bytes;
    peak = std::max(peak, wal);
    ASSERT_LE(wal, bound) << "after commit " << i;
  }
  std::printf("[ wal      ] %d commits of 64 KiB, wal_limit_bytes %llu: -wal file at most %llu\n",
              commits, static_cast<unsigned long long>(limit),
              static_cast<unsigned long long>(peak));
  // The data went into the database file.
  EXPECT_GE(s->stats().db_bytes, uint64_t(commits) * piece.size());
  // Idle: the checkpointer's own connection truncates the WAL.
  EXPECT_TRUE(eventually([&] { return s->stats().wal_bytes == 0; }))
      << "the WAL is still " << s->stats().wal_bytes << " bytes";
  auto st = s->stats();
  EXPECT_GT(st.checkpoints, 0u);
  EXPECT_EQ(st.checkpoint_failures, 0u) << st.last_checkpoint_error;
  EXPECT_EQ(s->job(r.id)->output_bytes, uint64_t(commits) * piece.size());
}

TEST_F(JobStore, CheckpointFailuresAreCountedAndTheCheckpointerRecovers) {
  counting_vfs vfs;
  struct failing {
    failing() { counting_vfs::fail_db_writes() = true; }
    ~failing() { end(); }
    void end() { counting_vfs::fail_db_writes() = false; }
  };
  auto s = open_store({.sync = store_options::durability::normal});
  ASSERT_TRUE(s);
  failing disk;  // from here on; destroyed (so ended) before the store
  job_row r = running_job(*s);
  s->append_output(r.id, 0, "kept", 1);
  ASSERT_TRUE(eventually([&] { return s->stats().checkpoint_failures > 0; }));
  auto st = s->stats();
  EXPECT_NE(st.last_checkpoint_error, "");
  EXPECT_GT(st.wal_bytes, 0u);  // nothing could be copied back
  // The broker's commits do not depend on checkpoints.
  s->append_output(r.id, 4, " too", 2);
  disk.end();
  // Without another commit: the idle checkpoint is retried until it succeeds.
  EXPECT_TRUE(eventually([&] { return s->stats().wal_bytes == 0; }))
      << s->stats().last_checkpoint_error;
  EXPECT_EQ(s->read_output(r.id, 0, 100), "kept too");
  s.reset();
  s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->read_output(r.id, 0, 100), "kept too");
}

TEST_F(JobStore, ASecondStoreOnTheSameFileIsRefusedNamingTheHolder) {
  // Finding 6: two brokers ran on one database. The holder here is another process, so the pid
  // in the message is not simply ours.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    close(ready[0]);
    close(release[1]);  // else the read below never sees the parent's end close
    auto s = job_store::open(path());
    char c = s ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(3);
    if (read(release[0], &c, 1) < 0) _exit(4);  // EOF when the parent closes its end
    _exit(s ? 0 : 2);
  }
  close(ready[1]);
  close(release[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto second = job_store::open(path());
  ASSERT_FALSE(second);
  EXPECT_NE(second.message().find("in use by another broker (pid " + std::to_string(pid) + ")"),
            std::string::npos)
      << second.message();
  EXPECT_NE(second.message().find("one broker per database"), std::string::npos);
  // Issue 52 (10): the lock was on the name, DB + ".lock": through a symlink or a hard link a
  // second broker locked another name, wrote its own WAL, and both acknowledged the same ids.
  const std::string symlink_path = path() + "-symlink", hard_link_path = path() + "-link";
  std::filesystem::create_symlink(path(), symlink_path);
  std::filesystem::create_hard_link(path(), hard_link_path);
  for (const std::string& other : {symlink_path, hard_link_path}) {
    auto linked = job_store::open(other);
    ASSERT_FALSE(linked) << other << " opened while the child holds " << path();
    EXPECT_NE(linked.message().find("(pid " + std::to_string(pid) + ")"), std::string::npos)
        << linked.message();
  }
  close(release[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(ready[0]);

  // The holder is gone (its lock file stays, with its pid): the next store opens. In one
  // process too, a second store is refused until the first is destroyed.
  auto first = open_store();
  ASSERT_TRUE(first);
  for (const std::string& name : {path(), symlink_path, hard_link_path}) {
    auto again = job_store::open(name);
    ASSERT_FALSE(again) << name;
    EXPECT_NE(again.message().find("(pid " + std::to_string(getpid()) + ")"), std::string::npos)
        << again.message();
  }
  first.reset();
  EXPECT_TRUE(open_store());
}

// What the disk-full child reports when a check fails: its exit status names the check.
#define CHILD_CHECK(cond, code)                                          \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::fprintf(stderr, "child: check %d failed: %s\n", code, #cond); \
      _exit(code);                                                       \
    }                                                                    \
  } while (0)

TEST_F(JobStore, AFullDiskFailsTheTurnAndTheStoreRecovers) {
  // Finding 5: "COMMIT: disk I/O error" ended the broker. The file-size limit is per process,
  // so a child runs the store under it.
  pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    auto opened = job_store::open(path());
    CHILD_CHECK(opened, 10);
    auto& s = *opened;
    for (int i = 0; i < 5; ++i) {
      job_row r = sample_job("kept", "prompt " + std::to_string(i));
      s->begin();
      s->insert_job(r, i);
      s->commit();
    }
    // Writes past 1 MiB now fail (EFBIG, SIGXFSZ ignored); the files are smaller than that.
    CHILD_CHECK(s->stats().db_bytes < (1 << 20) && s->stats().wal_bytes < (1 << 20), 11);
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{};
    CHILD_CHECK(getrlimit(RLIMIT_FSIZE, &lim) == 0, 12);
    const rlim_t unlimited = lim.rlim_cur;
    lim.rlim_cur = 1 << 20;
    CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, 13);

    const std::string big(2 << 20, 'b');
    bool failed = false;
    try {
      s->begin();
      job_row r = sample_job("lost", big);
      s->insert_job(r, 100);
      s->job_assigned(1, 1, "n1", 101);
      s->commit();
    } catch (const store_error& e) {
      std::fprintf(stderr, "child: as expected: %s (code %d)\n", e.what(), e.sqlite_code());
      s->rollback();
      failed = true;
    }
    CHILD_CHECK(failed, 14);
    // Nothing of the failed turn is visible; the earlier jobs are.
    CHILD_CHECK(s->job_count() == 5, 15);
    CHILD_CHECK(s->job(1)->state == job_state::queued, 16);
    CHILD_CHECK(s->job_events(1).size() == 1, 17);
    CHILD_CHECK(s->jobs({.model = "lost"}).empty(), 18);

    // Space comes back (the soft limit may be raised again up to the hard one).
    lim.rlim_cur = unlimited;
    CHILD_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, 19);
    s->begin();
    job_row r = sample_job("after", big);
    s->insert_job(r, 200);
    s->job_assigned(1, 1, "n1", 201);
    s->commit();
    CHILD_CHECK(s->job_count() == 6, 20);
    s.reset();
    auto reopened = job_store::open(path());
    CHILD_CHECK(reopened, 21);
    CHILD_CHECK((*reopened)->job_count() == 6, 22);
    for (uint64_t id = 1; id <= 5; ++id) {
      auto j = (*reopened)->job(id);
      CHILD_CHECK(j && j->model == "kept" && j->prompt == "prompt " + std::to_string(id - 1), 23);
    }
    CHILD_CHECK((*reopened)->job(6)->prompt == big, 24);
    CHILD_CHECK((*reopened)->job(1)->state == job_state::running, 25);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's line on stderr";
}

TEST_F(JobStore, ARequestKeyFindsItsJobOncePerOwner) {
  auto s = open_store();
  ASSERT_TRUE(s);
  job_row a = sample_job();
  a.owner = "alice";
  a.request_key = "k1";
  s->insert_job(a, 1);
  EXPECT_EQ(s->job_by_request_key("alice", "k1"), a.id);
  EXPECT_EQ(s->job_by_request_key("bob", "k1"), std::nullopt);
  EXPECT_EQ(s->job_by_request_key("alice", "k2"), std::nullopt);
  EXPECT_EQ(s->job_by_request_key("alice", ""), std::nullopt);

  // Another owner may use the same key; the same owner may not.
  job_row b = sample_job();
  b.owner = "bob";
  b.request_key = "k1";
  s->insert_job(b, 2);
  EXPECT_EQ(s->job_by_request_key("bob", "k1"), b.id);
  job_row dup = sample_job();
  dup.owner = "alice";
  dup.request_key = "k1";
  try {
    s->insert_job(dup, 3);
    ADD_FAILURE() << "a second job with alice's key k1";
  } catch (const store_error& e) {
    EXPECT_EQ(e.sqlite_code(), SQLITE_CONSTRAINT_UNIQUE) << e.what();
  }
  // No key: any number of jobs.
  for (int i = 0; i < 3; ++i) {
    job_row n = sample_job();
    n.owner = "alice";
    s->insert_job(n, 4);
  }
  EXPECT_EQ(s->job_count(), 5u);
  s.reset();
  s = open_store();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->job_by_request_key("alice", "k1"), a.id);
  EXPECT_EQ(s->job(a.id)->request_key, "k1");
}

TEST_F(JobStore, RollbackEndsTheTurnAndKeepsNothing) {
  auto s = open_store();
  ASSERT_TRUE(s);
  s->rollback();  // no transaction: nothing to do
  job_row kept = sample_job("kept");
  s->insert_job(kept, 1);
  s->begin();
  job_row lost = sample_job("lost");
  s->insert_job(lost, 2);
  s->job_assigned(kept.id, 1, "n1", 3);
  s->rollback();
  EXPECT_EQ(s->job_count(), 1u);
  EXPECT_EQ(s->job(kept.id)->state, job_state::queued);
  s->begin();  // usable again
  s->job_assigned(kept.id, 1, "n1", 4);
  s->commit();
  EXPECT_EQ(s->job(kept.id)->state, job_state::running);
}

TEST_F(JobStore, ApiParamsAndToolMessagesSurviveAReopenAndGiveTheSameAssignment) {
  job_row r = api_job();
  job_row plain = sample_job();
  {
    auto s = open_store();
    ASSERT_TRUE(s);
    s->insert_job(r, 10);
    s->insert_job(plain, 11);
    s->job_assigned(r.id, 1, "n1", 12);
  }
  EXPECT_EQ(sql_value(path(), "SELECT count(*) FROM job_api"), "1");  // none for the plain job
  EXPECT_EQ(sql_value(path(), "SELECT length(logit_bias) FROM job_api"), "24");
  EXPECT_EQ(sql_value(path(), "SELECT count(*) FROM job_tool_calls"), "1");
  auto s = open_store();  // a restarted broker
  ASSERT_TRUE(s);
  auto got = s->job(r.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(assign_of(*got), assign_of(r));  // every field, by the codec
  ASSERT_EQ(got->messages.size(), r.messages.size());
  ASSERT_EQ(got->messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(got->messages[2].tool_calls[0].arguments, r.messages[2].tool_calls[0].arguments);
  EXPECT_EQ(got->messages[2].reasoning_content, r.messages[2].reasoning_content);
  EXPECT_EQ(got->messages[3].tool_call_id, "call_1");
  EXPECT_EQ(got->params.api.tools, r.params.api.tools);
  EXPECT_FALSE(got->params.api.parallel_tool_calls);
  ASSERT_EQ(got->params.api.logit_bias.size(), 3u);
  EXPECT_EQ(got->params.api.logit_bias[0].token, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(got->params.api.logit_bias[1].token, -1);
  EXPECT_EQ(got->params.api.logit_bias[1].bias, 0.5f);
  EXPECT_TRUE(std::signbit(got->params.api.logit_bias[2].bias));  // the float's exact bits
  auto unfinished = s->unfinished_jobs();                         // what a restart takes over
  ASSERT_EQ(unfinished.size(), 2u);
  EXPECT_EQ(assign_of(unfinished[0]), assign_of(r));
  EXPECT_EQ(assign_of(unfinished[1]), assign_of(plain));
  // A retry is the same job row: requeued and assigned again, it still asks for the same.
  s->job_requeued(r.id, 1, "n1", "node lost", 20);
  s->job_assigned(r.id, 2, "n2", 21);
  EXPECT_EQ(assign_of(*s->job(r.id)), assign_of(r));
  // A job that asks for none of it reads as the defaults.
  const wire::api_params defaults;
  EXPECT_EQ(wire::encode(wire::job_assign{.params = {.api = s->job(plain.id)->params.api}}),
            wire::encode(wire::job_assign{.params = {.api = defaults}}));
}

TEST_F(JobStore, PruneDeletesOldFinishedJobsInBatchesAndNothingElse) {
  auto s = open_store();
  ASSERT_TRUE(s);
  // Jobs 1-10 finished at 1000 * id, with messages, events and output; 11 queued, 12 running,
  // both created long ago.
  s->begin();
  for (int i = 1; i <= 12; ++i) {
    job_row r = sample_job();
    r.messages = {{"user", "hi"}};
    r.messages[0].tool_calls = {{"call_1", "f", "{}"}};  // job_tool_calls rows to delete
    r.params.api.n = 2;                                  // and a job_api row
    s->insert_job(r, 0);
    if (i == 11) continue;
    s->job_assigned(r.id, 1, "n1", 0);
    s->append_output(r.id, 0, "out", 1);
    if (i <= 10) {
      s->job_finished(r.id, 1, "n1", job_state::completed, "eog", "", 1, 1, 1000 * i);
    }
  }
  s->commit();
  const int64_t now = 100000;
  EXPECT_EQ(s->prune({}, now, 100), 0u);  // no rule: nothing

  // By age: finished before now - 95500, so jobs 1-4, in batches of 3 (oldest first).
  retention by_age{.max_age_ms = 95500};
  EXPECT_EQ(s->prune(by_age, now, 3), 3u);
  EXPECT_FALSE(s->job(3));
  EXPECT_TRUE(s->job(4));
  EXPECT_EQ(s->prune(by_age, now, 3), 1u);
  EXPECT_EQ(s->prune(by_age, now, 3), 0u);
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_FALSE(s->job(id)) << id;
    EXPECT_TRUE(s->job_events(id).empty()) << id;
    EXPECT_EQ(s->read_output(id, 0, 10), "") << id;
  }
  for (const char* table :
       {"job_messages", "job_tool_calls", "job_api", "job_prompts", "job_output", "job_events"}) {
    std::string sql = "SELECT count(*) FROM "s + table + " WHERE job_id <= 4";
    EXPECT_EQ(sql_value(path(), sql.c_str()), "0") << table;
  }
  EXPECT_EQ(s->job(5)->messages.size(), 1u);

  // By count: keep the newest 2 finished (9, 10) of 5-10.
  EXPECT_EQ(s->prune({.keep_last = 2}, now, 100), 4u);
  EXPECT_EQ(s->job_count(), 4u);
  for (uint64_t id : {9, 10, 11, 12}) EXPECT_TRUE(s->job(id)) << id;
  EXPECT_EQ(s->read_output(9, 0, 10), "out");
  EXPECT_EQ(s->prune({.keep_last = 1}, now, 100), 1u);
  EXPECT_FALSE(s->job(9));
  // Unfinished jobs are never pruned, however old.
  EXPECT_EQ(s->prune({.max_age_ms = 1}, now, 100), 1u);
  EXPECT_EQ(s->job_count(), 2u);
  EXPECT_EQ(s->job(11)->state, job_state::queued);
  EXPECT_EQ(s->job(12)->state, job_state::running);
  EXPECT_EQ(s->read_output(12, 0, 10), "out");
}

TEST_F(JobStore, PruningManyJobsShrinksTheFile) {
  auto s = open_store({.sync = store_options::durability::normal});
  ASSERT_TRUE(s);
  const std::string prompt(32 << 10, 'p'), output = output_bytes_pattern(64 << 10, 4);
  for (int b = 0; b < 10; ++b) {
    s->begin();
    for (int i = 0; i < 20; ++i) {
      job_row r = running_job(*s, prompt);
      s->append_output(r.id, 0, output, 100);
      s->job_finished(r.id, 1, "n1", job_state::completed, "eog", "", 1, 100, 10);
    }
    s->commit();
  }
  const uint64_t pages_before = std::stoull(sql_value(path(), "PRAGMA page_count"));
  ASSERT_TRUE(eventually([&] { return s->stats().wal_bytes == 0; }));
  const uint64_t file_before = s->stats().db_bytes;
  EXPECT_GE(file_before, 200u * (96 << 10));

  uint64_t deleted = 0, calls = 0;
  for (uint64_t n = 1; n > 0; ++calls) {
    n = s->prune({.keep_last = 1}, 20, 25);
    ASSERT_LE(n, 25u);
    deleted += n;
  }
  EXPECT_EQ(deleted, 199u);
  EXPECT_GE(calls, 8u);  // batches of at most 25
  const uint64_t pages_after = std::stoull(sql_value(path(), "PRAGMA page_count"));
  EXPECT_LT(pages_after, pages_before / 20) << pages_before << " -> " << pages_after;
  EXPECT_EQ(sql_value(path(), "PRAGMA freelist_count"), "0");
  // The file itself shrinks when the checkpointer has copied the shorter database back.
  EXPECT_TRUE(eventually([&] { return s->stats().db_bytes < file_before / 20; }))
      << file_before << " -> " << s->stats().db_bytes;
  EXPECT_EQ(s->job(200)->prompt, prompt);
  EXPECT_TRUE(s->read_output(200, 0, UINT64_MAX) == output);
}

TEST_F(JobStore, ListingReadsNoPromptsOrMessages) {
  // Finding 10: listing 40 jobs with 4 MiB prompts read all of them.
  auto s = open_store({.sync = store_options::durability::normal});
  ASSERT_TRUE(s);
  const std::string prompt(1 << 20, 'p');
  s->begin();
  for (int i = 0; i < 40; ++i) {
    job_row r = sample_job("m", prompt);
    r.messages = {{"user", prompt}};
    s->insert_job(r, i);
  }
  s->commit();
  s.reset();  // a cold page cache, as after a restart
  s = open_store();
  ASSERT_TRUE(s);
  const sqlite3_int64 used = sqlite3_memory_used();
  sqlite3_memory_highwater(1);
  auto rows = s->jobs({.limit = 40});
  const sqlite3_int64 peak = sqlite3_memory_highwater(0) - used;
  ASSERT_EQ(rows.size(), 40u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.prompt, "") << r.id;
    EXPECT_TRUE(r.messages.empty()) << r.id;
  }
  // SQLite's own memory: a 1 MiB prompt read would need a 1 MiB buffer.
  EXPECT_LT(peak, 512 << 10);
  auto one = s->job(40);
  EXPECT_EQ(one->prompt, prompt);
  ASSERT_EQ(one->messages.size(), 1u);
  EXPECT_EQ(one->messages[0].content, prompt);
}

// Prints what the broker's write path sustains; asserts nothing about time.
TEST_F(JobStore, PerfRecordsJobsInBatches) {
  auto s = open_store();  // durability::full, as a broker runs
  ASSERT_TRUE(s);
  const int n_jobs = 10000, batch = 100;
  const std::string output(600, 'x');
  auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < n_jobs / batch; ++b) {
    s->begin();
    for (int i = 0; i < batch; ++i) {
      job_row r = sample_job("stories260K", std::string(200, 'p'));
      r.params.stop = {"\n\n"};
      int64_t t = b * batch + i;
      s->insert_job(r, t);
      s->job_assigned(r.id, 1, "n1", t);
      s->job_started(r.id, 1, "n1", 50, t);
      s->append_output(r.id, 0, output, 128);
      s->job_finished(r.id, 1, "n1", job_state::completed, "max_tokens", "", 50, 128, t);
    }
    s->commit();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s->job_count(), static_cast<uint64_t>(n_jobs));

  // The same lifecycle without begin()/commit(): a transaction, so an fsync, per call.
  const int n_auto = 200;
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_auto; ++i) {
    job_row r = sample_job("stories260K", std::string(200, 'p'));
    s->insert_job(r, i);
    s->job_assigned(r.id, 1, "n1", i);
    s->job_started(r.id, 1, "n1", 50, i);
    s->append_output(r.id, 0, output, 128);
    s->job_finished(r.id, 1, "n1", job_state::completed, "max_tokens", "", 50, 128, i);
  }
  double auto_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf(
      "[ perf     ] %d jobs (insert+assigned+started+output+finished, %d per transaction): "
      "%.3f s, %.0f jobs/s\n",
      n_jobs, batch, secs, n_jobs / secs);
  std::printf("[ perf     ] %d jobs without begin()/commit(): %.3f s, %.0f jobs/s\n", n_auto,
              auto_secs, n_auto / auto_secs);
}

}  // namespace
}  // namespace hearth::broker
