#include "broker/job-store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

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

  std::unique_ptr<job_store> open_store() {
    auto s = job_store::open(path());
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

std::vector<std::string> event_names(job_store& s, uint64_t id) {
  std::vector<std::string> names;
  for (const auto& e : s.job_events(id)) names.push_back(e.event);
  return names;
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
  r.output = "text so far";
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
  EXPECT_EQ(got->output, "text so far");

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
  s->job_started(id, 1, 9, 120);
  s->job_output(id, "Once there", 2);
  EXPECT_EQ(s->job(id)->output, "Once there");
  EXPECT_EQ(s->job(id)->n_gen, 2u);
  s->job_requeued(id, 1, "n1", "node lost", 130);
  auto q = s->job(id);
  EXPECT_EQ(q->state, job_state::queued);
  EXPECT_EQ(q->output, "");
  EXPECT_EQ(q->n_gen, 0u);
  EXPECT_EQ(q->attempts, 1u);
  s->job_assigned(id, 2, "n2", 140);
  s->job_started(id, 2, 9, 150);
  s->job_finished(id, 2, "n2", job_state::completed, "max_tokens", "", 9, 4, "Once there was", 160);
  // A batch that arrives after the final must not replace the final output.
  s->job_output(id, "Once", 1);

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
  EXPECT_EQ(done->output, "Once there was");

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
  s->job_finished(a.id, 1, "n1", job_state::failed, "", "out of memory", 0, 0, "", 4);
  // A queued job cancelled before any attempt: no node given, none recorded.
  s->job_finished(b.id, 0, "", job_state::cancelled, "cancelled", "", 0, 0, "", 5);
  EXPECT_EQ(event_names(*s, a.id), (std::vector<std::string>{"queued", "assigned", "failed"}));
  EXPECT_EQ(s->job_events(a.id).back().detail, "out of memory");
  EXPECT_EQ(s->job(a.id)->error, "out of memory");
  EXPECT_EQ(s->job(a.id)->node, "n1");
  EXPECT_EQ(event_names(*s, b.id), (std::vector<std::string>{"queued", "cancelled"}));
  EXPECT_EQ(s->job(b.id)->state, job_state::cancelled);
  EXPECT_EQ(s->job(b.id)->node, "");
  EXPECT_THROW(s->job_finished(a.id, 1, "n1", job_state::running, "", "", 0, 0, "", 6),
               std::invalid_argument);
}

TEST_F(JobStore, ChangesToAnUnknownJobThrow) {
  auto s = open_store();
  ASSERT_TRUE(s);
  EXPECT_THROW(s->job_assigned(7, 1, "n1", 1), std::runtime_error);
  EXPECT_THROW(s->job_started(7, 1, 3, 1), std::runtime_error);
  EXPECT_THROW(s->job_requeued(7, 1, "n1", "x", 1), std::runtime_error);
  EXPECT_THROW(s->job_finished(7, 1, "n1", job_state::completed, "", "", 0, 0, "", 1),
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
    r.output = "output " + std::to_string(i);
    s->insert_job(r, i);
    if (i <= 5) s->job_assigned(r.id, 1, "n1", i);
    if (i <= 3) s->job_finished(r.id, 1, "n1", job_state::completed, "eog", "", 1, 1, "x", i);
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
  for (const auto& r : all) {
    EXPECT_EQ(r.output, "") << r.id;
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].content, "hello " + std::to_string(r.id));
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
  EXPECT_EQ(unfinished[2].output, "output 6");  // a restarted broker gets the whole row
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
  EXPECT_EQ(pragma("PRAGMA user_version"), "2");
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
  make(path(), "PRAGMA user_version = 3");
  auto c = job_store::open(path());
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("schema version 3"), std::string::npos) << c.message();
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
  EXPECT_EQ(old->output, "old output");
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

// Prints what the broker's write path sustains; asserts nothing about time.
TEST_F(JobStore, PerfRecordsJobsInBatches) {
  auto s = open_store();
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
      s->job_started(r.id, 1, 50, t);
      s->job_finished(r.id, 1, "n1", job_state::completed, "max_tokens", "", 50, 128, output, t);
    }
    s->commit();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s->job_count(), static_cast<uint64_t>(n_jobs));

  // The same lifecycle without begin()/commit(): a transaction per call.
  const int n_auto = 1000;
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_auto; ++i) {
    job_row r = sample_job("stories260K", std::string(200, 'p'));
    s->insert_job(r, i);
    s->job_assigned(r.id, 1, "n1", i);
    s->job_started(r.id, 1, 50, i);
    s->job_finished(r.id, 1, "n1", job_state::completed, "max_tokens", "", 50, 128, output, i);
  }
  double auto_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf(
      "[ perf     ] %d jobs (insert+assigned+started+finished, %d per transaction): "
      "%.3f s, %.0f jobs/s\n",
      n_jobs, batch, secs, n_jobs / secs);
  std::printf("[ perf     ] %d jobs without begin()/commit(): %.3f s, %.0f jobs/s\n", n_auto,
              auto_secs, n_auto / auto_secs);
}

}  // namespace
}  // namespace hearth::broker
