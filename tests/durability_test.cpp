// Issue 16: the job store keeps PROTOCOL.md's promise (section 12). Each finding of the issue as a
// test against real hearth-broker and hearth-node processes on loopback and their real SQLite file
// (tests/cluster.h): acknowledged jobs survive kill -9 and are never duplicated by a retry, a
// second broker cannot open the database, a full disk is survived, a submit is fsync'd before its
// reply (seen with strace), outputs of any size are read back whole, and the WAL stays bounded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/process.h"
#include "tests/syscall-trace.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using testing::cluster;
using testing::fake_node;
using testing::nodes_online;
using testing::read_trace;
using testing::test_client;
using testing::traced_call;
using testing::wait_until;

constexpr auto job = testing::greedy_job;

uint64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

// The absolute path of `name` on PATH, or "" (posix_spawn does not search PATH).
std::string find_program(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string p = dir + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Waits until the broker answers requests.
bool serving(test_client& c) {
  return wait_until([&] {
    return c.request<wire::jobs_reply>(wire::list_jobs{0, "", "", 1}).has_value();
  });
}

// A submit that can wait for its model (no node needed) and carries an idempotency key.
wire::submit keyed_job(const std::string& key, const std::string& prompt) {
  auto s = job("alpha", prompt, 1);
  s.wait_model = true;
  s.request_key = key;
  return s;
}

// get_job of many jobs, pipelined (a window of requests in flight): each id's detail, or nothing
// for a job the broker does not have (not_found). Other errors and timeouts fail the test.
std::map<uint64_t, std::optional<wire::job_detail>> get_jobs(test_client& c,
                                                             const std::vector<uint64_t>& ids) {
  std::map<uint64_t, std::optional<wire::job_detail>> out;
  std::map<uint64_t, uint64_t> job_of_request;
  uint64_t next_request = uint64_t(1) << 40;  // apart from test_client::request's ids
  size_t sent = 0;
  const auto until = steady::now() + 60s;
  while (out.size() < ids.size() && steady::now() < until) {
    while (sent < ids.size() && job_of_request.size() < 256) {
      wire::get_job g;
      g.request_id = next_request++;
      g.job_id = ids[sent++];
      job_of_request[g.request_id] = g.job_id;
      c.send(g);
    }
    auto ev = c.next_event(100ms);
    if (!ev) continue;
    if (ev->cmd == wire::command::job_reply) {
      auto r = wire::decode<wire::job_reply>(ev->body);
      if (!r || !job_of_request.contains(r->request_id)) continue;
      out[job_of_request[r->request_id]] = r->job;
      job_of_request.erase(r->request_id);
    } else if (ev->cmd == wire::command::error) {
      auto e = wire::decode<wire::error_reply>(ev->body);
      if (!e || !job_of_request.contains(e->request_id)) continue;
      EXPECT_EQ(e->code, wire::error_code::not_found) << e->message;
      out[job_of_request[e->request_id]] = std::nullopt;
      job_of_request.erase(e->request_id);
    }
  }
  EXPECT_EQ(out.size(), ids.size()) << "get_job replies missing";
  return out;
}

// The newest job's id (job ids count up from 1), 0 when there is none.
uint64_t newest_job_id(test_client& c) {
  auto r = c.request<wire::jobs_reply>(wire::list_jobs{0, "", "", 1});
  EXPECT_TRUE(r);
  return r && !r->jobs.empty() ? r->jobs[0].job_id : 0;
}

// A job's whole output, read page by page with get_job (PROTOCOL.md section 10.5).
std::string output_by_pages(test_client& c, uint64_t job_id, size_t* pages = nullptr) {
  std::string out;
  size_t n = 0;
  for (;;) {
    wire::get_job g;
    g.job_id = job_id;
    g.output_offset = out.size();
    std::string err;
    auto r = c.request<wire::job_reply>(g, &err);
    if (!r) {
      ADD_FAILURE() << "get_job " << job_id << " at " << out.size() << ": " << err;
      break;
    }
    ++n;
    EXPECT_EQ(r->output_offset, out.size());
    out += r->job.output;
    if (out.size() >= r->output_total_bytes || r->job.output.empty()) break;
  }
  if (pages) *pages = n;
  return out;
}

// `hearth ARGS` against the cluster with a client's key.
testing::process_result hearth_cli(cluster& c, const std::string& args) {
  std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c.endpoint();
  for (const auto& a : c.key_args("client", "default")) cmd += " " + testing::shell_quote(a);
  return testing::run_command(cmd);
}

void record(const char* name, uint64_t value) {
  ::testing::Test::RecordProperty(name, std::to_string(value));
  std::printf("  %s: %llu\n", name, static_cast<unsigned long long>(value));
}

class durability_test : public ::testing::Test {
 protected:
  cluster c_;
};

// --- 1. kill -9 during a stream of submits --------------------------------------------------

// A client submits a stream of jobs, each with its own request_key, as the CLI does: a submit
// whose reply does not come within a second is sent again with the same key. Meanwhile the
// broker is killed (SIGKILL) 10 times at random moments and restarted on the same database and
// port. Every acknowledged job must be in the database, and no key may have two jobs: a job
// committed but not acknowledged before a kill is found again by its key when the client retries.
TEST_F(durability_test, ten_broker_kills_during_a_stream_of_submits_lose_and_duplicate_nothing) {
  // The stream outruns the node: more unfinished jobs than a client, or the queue, may hold by
  // default. A fast machine's broker takes over 100,000 in the test's 3-13 s of submits (106,625
  // on a Zen 5), so neither limit may be near that.
  c_.broker_settings({{"max_client_queued_jobs", "10000000"}, {"max_queue", "10000000"}});
  auto broker = c_.start_broker();
  auto node = c_.start_node("steady", c_.models("m", {"alpha"}), "null", 4,
                            {"--null-tokens-per-s", "1000"});
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(serving(client)) << broker.log();

  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kill_after_ms(200, 1200);
  RecordProperty("seed", std::to_string(seed));

  // As fast as the broker takes them, so that every kill finds submits in flight: some not yet
  // read, some committed but not yet answered.
  constexpr size_t window = 64;     // submits in flight at once
  constexpr auto retry_after = 1s;  // the CLI's timeout before it sends the submit again
  const std::string prompt_prefix = "kill test ";
  std::map<uint64_t, std::string> key_of_request;     // every submit sent, retries included
  std::map<std::string, steady::time_point> waiting;  // key -> when its last submit went out
  std::map<std::string, uint64_t> acked;              // key -> job id
  // Request ids of their own: a late reply to a retried submit is not taken for another reply.
  uint64_t next_request = uint64_t(1) << 32;
  uint64_t retries = 0, storage_errors = 0, acked_twice_differently = 0;
  uint64_t in_flight_at_kills = 0;
  int next_key = 0, kills = 0;

  auto send_submit = [&](const std::string& key) {
    auto s = keyed_job(key, prompt_prefix + key);
    s.request_id = next_request++;
    key_of_request[s.request_id] = key;
    waiting[key] = steady::now();
    client.send(s);
  };

  const auto start = steady::now();
  auto next_kill = start + std::chrono::milliseconds(kill_after_ms(rng));
  auto stream_end = steady::time_point::max();
  for (;;) {
    const auto now = steady::now();
    if (kills < 10 && now >= next_kill) {
      in_flight_at_kills += waiting.size();
      broker.signal(SIGKILL);
      ASSERT_EQ(broker.wait(), 128 + SIGKILL);
      broker = c_.start_broker();
      ++kills;
      next_kill = now + std::chrono::milliseconds(kill_after_ms(rng));
      if (kills == 10) stream_end = now + 1s;  // a last second of submits to the last broker
    }
    while (now < stream_end && waiting.size() < window) {
      send_submit("k" + std::to_string(next_key++));
    }
    for (const auto& [key, sent] : waiting) {
      if (now - sent < retry_after) continue;
      ++retries;
      send_submit(key);
      break;  // waiting changed; look again on the next round
    }
    // One message a round, so that the window refills as replies come and a kill finds it full.
    if (auto ev = client.next_event(1ms); ev && ev->cmd == wire::command::accepted) {
      auto a = wire::decode<wire::accepted>(ev->body);
      if (a && key_of_request.contains(a->request_id)) {
        const std::string& key = key_of_request[a->request_id];
        auto [it, fresh] = acked.emplace(key, a->job_id);
        if (!fresh && it->second != a->job_id) ++acked_twice_differently;
        waiting.erase(key);
      }
    } else if (ev && ev->cmd == wire::command::error) {
      auto e = wire::decode<wire::error_reply>(ev->body);
      // A broker that could not write says so; the key is sent again after retry_after.
      if (e && (e->code == wire::error_code::storage_unavailable ||
                e->code == wire::error_code::internal)) {
        ++storage_errors;
      } else if (e && key_of_request.contains(e->request_id)) {
        ADD_FAILURE() << "submit refused: " << wire::error_code_name(e->code) << ": " << e->message;
        waiting.erase(key_of_request[e->request_id]);
      }
    }
    if (now >= stream_end && waiting.empty()) break;
    ASSERT_LT(now, kills < 10 ? start + 120s : stream_end + 30s)
        << kills << " kills, " << waiting.size() << " submits never acknowledged\n"
        << broker.log();
  }

  // Every acknowledged job, by its id, with its own prompt; and no other job.
  std::vector<uint64_t> ids;
  std::map<uint64_t, std::string> key_of_job;
  for (const auto& [key, id] : acked) {
    ids.push_back(id);
    key_of_job[id] = key;
  }
  uint64_t lost = 0;
  for (const auto& [id, d] : get_jobs(client, ids)) {
    if (!d || d->prompt != prompt_prefix + key_of_job[id]) ++lost;
  }
  const uint64_t newest = newest_job_id(client);
  std::vector<uint64_t> others;
  for (uint64_t id = 1; id <= newest; ++id) {
    if (!key_of_job.contains(id)) others.push_back(id);
  }
  uint64_t duplicated = 0;
  for (const auto& [id, d] : get_jobs(client, others)) duplicated += d.has_value();

  std::printf("kill test (seed %u):\n", seed);
  record("kills", uint64_t(kills));
  record("acknowledged", acked.size());
  record("lost", lost);
  record("duplicated", duplicated);
  record("newest_job_id", newest);
  record("in_flight_at_kills", in_flight_at_kills);
  record("retries", retries);
  record("storage_errors", storage_errors);
  EXPECT_EQ(kills, 10);
  EXPECT_GT(acked.size(), 500u) << "the stream ran through the kills";
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(duplicated, 0u) << "jobs beyond the acknowledged ones: a retry made a second job";
  EXPECT_EQ(acked_twice_differently, 0u) << "a key acknowledged with two job ids";
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), acked.size());
  EXPECT_GE(newest, acked.size());
}

// --- 2. one broker per database -------------------------------------------------------------

TEST_F(durability_test, a_second_broker_on_the_same_database_is_refused) {
  auto first = c_.start_broker();
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(serving(client)) << first.log();
  auto before = client.request<wire::accepted>(keyed_job("before", "before the second broker"));
  ASSERT_TRUE(before);

  // Issue 52 (10): the lock was on the name (DB + ".lock"), so a second broker on a symlink or
  // a hard link to the database ran beside the first, with a WAL of its own: both acknowledged
  // the same job ids and one's jobs were lost. The lock is on the file now.
  const std::string symlink_path = c_.db() + "-symlink", hard_link_path = c_.db() + "-link";
  std::filesystem::create_symlink(c_.db(), symlink_path);
  std::filesystem::create_hard_link(c_.db(), hard_link_path);
  for (const std::string& db : {c_.db(), symlink_path, hard_link_path}) {
    const std::string other = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
    auto argv = c_.broker_argv(other);
    *(std::find(argv.begin(), argv.end(), "--db") + 1) = db;
    auto second = testing::spawn(
        argv,
        c_.dir().file("second-broker-" + std::filesystem::path(db).filename().string() + ".log"));
    const int code = second.wait(10s);
    const std::string log = second.log();
    EXPECT_NE(code, -1) << "the second broker on " << db << " is still running:\n" << log;
    EXPECT_NE(code, 0) << log;
    // The message names the database held and why: locked, in use.
    EXPECT_NE(log.find(db), std::string::npos) << "the message names the database:\n" << log;
    EXPECT_TRUE(log.find("lock") != std::string::npos || log.find("in use") != std::string::npos)
        << "the message says the database is locked:\n"
        << log;
    EXPECT_NE(log.find(std::to_string(first.pid())), std::string::npos)
        << "the message names the first broker's pid " << first.pid() << ":\n"
        << log;
  }

  // The first one kept its database and serves on.
  EXPECT_TRUE(first.running());
  auto after = client.request<wire::accepted>(keyed_job("after", "after the second broker"));
  ASSERT_TRUE(after) << first.log();
  for (auto id : {before->job_id, after->job_id}) {
    auto d = client.request<wire::job_reply>(wire::get_job{0, id});
    ASSERT_TRUE(d) << "job " << id;
  }
}

// --- 3. a full disk -------------------------------------------------------------------------

// The broker's files on a size limit (RLIMIT_FSIZE, set on the running broker with prlimit(2),
// which also lifts it later): writes past it fail with EFBIG, as they would with ENOSPC on a full
// disk. The broker must ignore SIGXFSZ, which the kernel sends with EFBIG and which kills by
// default. Submits of large prompts fill it until one gets storage_unavailable; the broker keeps
// answering reads; when the limit is lifted it accepts submits again by itself; and every job
// acknowledged before is intact after a restart.
bool set_file_size_limit(pid_t pid, rlim_t bytes) {
  rlimit r{};
  if (prlimit(pid, RLIMIT_FSIZE, nullptr, &r) != 0) return false;
  r.rlim_cur = bytes;
  return prlimit(pid, RLIMIT_FSIZE, &r, nullptr) == 0;
}

TEST_F(durability_test, a_full_disk_refuses_submits_keeps_serving_and_recovers) {
  c_.broker_settings({{"log_level", "info"}});  // the log is written under the limit too
  auto broker = c_.start_broker();
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(serving(client)) << broker.log();
  constexpr rlim_t limit = 4 << 20;
  ASSERT_TRUE(set_file_size_limit(broker.pid(), limit)) << strerror(errno);

  // 200,000-byte prompts, each its own text, fit one get_job page.
  auto prompt_of = [](const std::string& key) {
    std::string p = key + ":";
    while (p.size() < 200000) p += " " + key + std::to_string(p.size());
    return p.substr(0, 200000);
  };
  std::vector<std::pair<std::string, uint64_t>> acked;  // key, job id
  std::string refused_key;
  for (int i = 0; i < 200 && refused_key.empty(); ++i) {
    const std::string key = "fill" + std::to_string(i);
    std::string err;
    auto a = client.request<wire::accepted>(keyed_job(key, prompt_of(key)), &err);
    if (a) {
      acked.emplace_back(key, a->job_id);
      continue;
    }
    ASSERT_TRUE(broker.running()) << "the broker died (status " << broker.wait(1s)
                                  << "; 153 is SIGXFSZ: it must ignore it)\n"
                                  << broker.log();
    ASSERT_NE(err.find("storage_unavailable"), std::string::npos) << err;
    refused_key = key;
  }
  ASSERT_FALSE(refused_key.empty()) << "200 prompts of 200,000 bytes fit under " << limit;
  std::printf("  %zu jobs acknowledged before the file-size limit of %llu bytes\n", acked.size(),
              static_cast<unsigned long long>(limit));
  EXPECT_GT(acked.size(), 0u);

  // Full, it still answers what needs no write: the list and every job.
  EXPECT_TRUE(broker.running());
  auto list = client.request<wire::jobs_reply>(wire::list_jobs{0, "", "", 1000});
  ASSERT_TRUE(list) << broker.log();
  EXPECT_EQ(list->jobs.size(), acked.size());
  for (const auto& [key, id] : acked) {
    auto d = client.request<wire::job_reply>(wire::get_job{0, id});
    ASSERT_TRUE(d) << "job " << id;
    EXPECT_EQ(d->job.prompt, prompt_of(key)) << "job " << id;
  }

  // Space comes back: the refused submit goes through when the client tries again (same key),
  // without a restart.
  ASSERT_TRUE(set_file_size_limit(broker.pid(), RLIM_INFINITY)) << strerror(errno);
  std::optional<wire::accepted> again;
  std::string err;
  wait_until(
      [&] {
        again =
            client.request<wire::accepted>(keyed_job(refused_key, prompt_of(refused_key)), &err);
        return again.has_value();
      },
      20s);
  ASSERT_TRUE(again) << "still refused after the limit was lifted: " << err << "\n" << broker.log();
  acked.emplace_back(refused_key, again->job_id);
  auto next = client.request<wire::accepted>(keyed_job("after", prompt_of("after")), &err);
  ASSERT_TRUE(next) << err;
  acked.emplace_back("after", next->job_id);

  // Every acknowledged job, and only those, after a kill and a restart.
  broker.signal(SIGKILL);
  broker.wait();
  broker = c_.start_broker();
  auto after_ptr = c_.client();
  ASSERT_TRUE(serving(*after_ptr)) << broker.log();
  for (const auto& [key, id] : acked) {
    auto d = after_ptr->request<wire::job_reply>(wire::get_job{0, id});
    ASSERT_TRUE(d) << "job " << id << " lost";
    EXPECT_EQ(d->job.prompt, prompt_of(key)) << "job " << id;
  }
  auto all = after_ptr->request<wire::jobs_reply>(wire::list_jobs{0, "", "", 1000});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->jobs.size(), acked.size()) << "the refused submit left nothing behind";
}

// Tokens relayed in a turn whose commit fails were never sent (nothing of a failed turn goes
// out): once the store is writable the node sends them again (job_resume) and the watcher gets
// them, with nothing missing.
TEST_F(durability_test, a_watcher_misses_nothing_of_a_stream_whose_turn_failed_to_commit) {
  fake_node node(c_, "writer");
  node.hello(1, {"alpha"});
  auto broker = c_.start_broker();
  ASSERT_TRUE(node.next<wire::node_welcome>()) << broker.log();
  node.send(wire::node_pull{1});
  auto watcher = c_.client();
  auto s = job("alpha", "watch me", 4);
  s.watch = true;
  auto acc = watcher->request<wire::accepted>(s);
  ASSERT_TRUE(acc) << broker.log();
  auto a = node.next<wire::job_assign>();
  ASSERT_TRUE(a) << broker.log();
  node.send(wire::job_started{a->job_id, a->attempt, 1});
  node.send(wire::job_tokens{a->job_id, a->attempt, 0, 2, "a b "});
  std::this_thread::sleep_for(300ms);  // stored (output_flush_ms is 50)

  // The disk refuses every write: the turn that relays "c d " and finishes the job fails.
  ASSERT_TRUE(set_file_size_limit(broker.pid(), 1)) << strerror(errno);
  const wire::job_final final{.job_id = a->job_id,
                              .attempt = a->attempt,
                              .stop_reason = "max_tokens",
                              .n_prompt = 1,
                              .n_gen = 4};
  node.send(wire::job_tokens{a->job_id, a->attempt, 2, 2, "c d "});
  node.send(final);
  auto resume = node.next<wire::job_resume>();
  ASSERT_TRUE(resume) << broker.log();
  EXPECT_EQ(resume->seq, 2u) << "the stream resumes from what was stored";
  ASSERT_TRUE(set_file_size_limit(broker.pid(), RLIM_INFINITY)) << strerror(errno);
  node.send(wire::job_tokens{a->job_id, a->attempt, 2, 2, "c d "});
  node.send(final);
  // The node stays alive (heartbeats) until the job has ended; the watcher's events wait in its
  // socket meanwhile.
  auto other = c_.client();
  ASSERT_TRUE(wait_until([&] {
    node.send(wire::heartbeat{});
    auto d = other->request<wire::job_reply>(wire::get_job{0, a->job_id});
    return d && wire::job_state_is_final(d->job.summary.state);
  })) << broker.log();

  auto seen = watcher->follow(acc->job_id, 30s);
  ASSERT_TRUE(seen.done) << broker.log();
  EXPECT_EQ(seen.done->state, wire::job_state::completed);
  EXPECT_EQ(seen.text, "a b c d ") << broker.log();
  EXPECT_EQ(seen.restarts, 0u);
}

// --- 4. fsync before the acknowledgement, seen with strace ---------------------------------

// The broker under strace, submits sent one at a time, each waiting for its accepted. For each
// submit, from the trace: did a sync (fsync or fdatasync) end between the submit's arrival (the
// first read of data after the client sent it) and the start of the reply's send (the last
// write of data before the client received it)? ZeroMQ's I/O thread reads and writes the
// socket; the broker's own thread commits, and with durability full syncs; its checkpointer
// thread syncs at checkpoints in either mode. strace -f stamps every thread's calls with one
// clock, the same wall clock the client reads.
struct sync_count {
  int submits = 0;
  int synced = 0;        // submits with a sync by the broker's thread between arrival and reply
  int broker_syncs = 0;  // syncs of the broker's thread while the submits ran
  int other_syncs = 0;   // syncs of its other threads (the checkpointer) meanwhile
};

sync_count syncs_per_submit(cluster& c, const std::string& strace, const std::string& durability,
                            int n) {
  c.broker_settings({{"durability", durability}, {"log_level", "info"}});
  const std::string trace = c.dir().file("broker-" + durability + ".strace");
  // Under AddressSanitizer: LeakSanitizer cannot run under ptrace and would fail the traced
  // broker's exit (the other sanitizer checks stay on).
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string asan_options = std::string(asan ? asan : "");
  ::setenv("ASAN_OPTIONS",
           (asan_options + (asan_options.empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
  auto tracer = c.start_broker({}, {strace, "-f", "-ttt", "-T", "-o", trace, "-e",
                                    "trace=fsync,fdatasync,sendto,sendmsg,recvfrom,recvmsg"});
  if (asan) {
    ::setenv("ASAN_OPTIONS", asan, 1);
  } else {
    ::unsetenv("ASAN_OPTIONS");
  }
  auto client = c.client();
  EXPECT_TRUE(serving(*client)) << tracer.log();
  // The broker's first thread, the one that runs its event loop, has its pid.
  const pid_t broker = testing::first_child(tracer.pid());
  EXPECT_GT(broker, 0);
  auto wall = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  std::vector<std::pair<double, double>> spans;  // sent, accepted (wall clock seconds)
  for (int i = 0; i < n; ++i) {
    const std::string key = durability + std::to_string(i);
    const double sent = wall();
    auto a = client->request<wire::accepted>(keyed_job(key, "synced? " + key));
    const double received = wall();
    EXPECT_TRUE(a) << tracer.log();
    if (a) spans.emplace_back(sent, received);
  }
  // strace exits when the broker does: SIGTERM the broker, not strace, which would leave it
  // running untraced.
  if (broker > 0) ::kill(broker, SIGTERM);
  EXPECT_EQ(tracer.wait(20s), 0) << tracer.log();

  const auto calls = read_trace(trace);
  auto is = [](const traced_call& call, std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(),
                       [&](const char* name) { return call.name == name; });
  };
  sync_count out;
  for (const auto& [sent, received] : spans) {
    const traced_call* arrival = nullptr;
    const traced_call* reply = nullptr;
    for (const auto& call : calls) {
      if (call.start < sent || call.start > received || call.result <= 0) continue;
      if (!arrival && is(call, {"recvfrom", "recvmsg"})) arrival = &call;
      if (arrival && is(call, {"sendto", "sendmsg"})) reply = &call;
    }
    ++out.submits;
    if (!arrival || !reply) {
      ADD_FAILURE() << "no read and write of the submit in the trace " << trace;
      continue;
    }
    bool synced = false;
    for (const auto& call : calls) {
      if (!is(call, {"fsync", "fdatasync"}) || call.result != 0) continue;
      if (call.start < sent || call.end > received) continue;
      const bool own = call.tid == broker;
      ++(own ? out.broker_syncs : out.other_syncs);
      synced |= own && call.start >= arrival->end && call.end <= reply->start;
    }
    out.synced += synced;
  }
  return out;
}

TEST_F(durability_test, a_submit_is_fsynced_before_its_accepted_and_normal_durability_is_not) {
  const std::string strace = find_program("strace");
  if (strace.empty()) GTEST_SKIP() << "strace is not installed (deploy/install-deps.sh has it)";
  constexpr int n = 20;
  for (const char* mode : {"full", "normal"}) {
    const auto r = syncs_per_submit(c_, strace, mode, n);
    std::printf(
        "durability %s: %d of %d submits synced by the broker's thread before their reply "
        "(%d syncs by it, %d by its other threads)\n",
        mode, r.synced, r.submits, r.broker_syncs, r.other_syncs);
    RecordProperty(std::string(mode) + "_synced", r.synced);
    EXPECT_EQ(r.submits, n);
    if (std::string(mode) == "full") {
      EXPECT_EQ(r.synced, n) << "every accepted went out after an fsync of its commit";
    } else {
      // Normal syncs no commit. The checkpointer syncs at checkpoints, and the first commit
      // after a checkpoint emptied the WAL syncs the new WAL's header: a few submits a second
      // (checkpoints run every 100 ms while the broker writes), far from every one.
      EXPECT_LE(r.synced, n / 2) << "durability normal syncs at checkpoints, not per submit";
    }
  }
}

// --- 5. outputs of any size ------------------------------------------------------------------

// The null engine's output is at most 1,048,576 tokens of 2 to 7 bytes (about 4.8 MB); a fake
// node streams more, in tokens of 100 bytes that each say where they are, so a byte out of place
// shows. Over 8 MiB it cannot travel in one message (wire::max_message_bytes): get_job pages
// through it, the CLI reads it whole, and a watcher gets it all.
std::string big_token(uint32_t i) {
  char head[32];
  std::snprintf(head, sizeof head, "[token %07u]", i);
  std::string t(head);
  t.resize(99, char('a' + i % 26));
  return t + "\n";
}

TEST_F(durability_test, an_output_over_8_mib_is_streamed_paged_and_printed_whole) {
  auto broker = c_.start_broker();
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(serving(client)) << broker.log();

  constexpr uint32_t n_tokens = 90000;  // 9,000,000 bytes
  constexpr uint32_t per_chunk = 64;
  std::string expected;
  for (uint32_t i = 0; i < n_tokens; ++i) expected += big_token(i);
  ASSERT_GT(expected.size(), size_t(8) << 20);

  auto fake = std::make_unique<fake_node>(c_, "streamer");
  std::string node_error;
  std::thread node_thread([&, node = std::move(fake)] {
    node->hello(1, {"big"});
    if (!node->welcomed()) return void(node_error = "not welcomed");
    node->send(wire::node_pull{1});
    auto heard = node->listen(20s, [](auto& h) { return !h.assigns.empty(); });
    if (heard.assigns.empty()) return void(node_error = "no job assigned");
    const auto a = heard.assigns[0];
    node->send(wire::job_started{a.job_id, a.attempt, 1});
    for (uint32_t seq = 0; seq < n_tokens; seq += per_chunk) {
      wire::job_tokens t{a.job_id, a.attempt, seq, std::min(per_chunk, n_tokens - seq), ""};
      for (uint32_t i = seq; i < seq + t.n_tokens; ++i) t.text += big_token(i);
      node->send(t);
    }
    wire::job_final f;
    f.job_id = a.job_id;
    f.attempt = a.attempt;
    f.stop_reason = "max_tokens";
    f.n_prompt = 1;
    f.n_gen = n_tokens;
    node->send(f);
    node->listen(2s);  // stay until the final is through
  });

  auto s = job("big", "a long story", int32_t(n_tokens));
  s.watch = true;
  s.wait_model = true;
  auto acc = client.request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  auto watched = client.follow(acc->job_id, 120s);
  node_thread.join();
  ASSERT_TRUE(node_error.empty()) << node_error << "\n" << broker.log();
  ASSERT_TRUE(watched.done) << broker.log();
  EXPECT_EQ(watched.done->state, wire::job_state::completed) << watched.done->error;
  EXPECT_EQ(watched.done->n_gen, n_tokens);
  EXPECT_TRUE(watched.text == expected)
      << "the watcher got " << watched.text.size() << " of " << expected.size() << " bytes";

  size_t pages = 0;
  const std::string paged = output_by_pages(client, acc->job_id, &pages);
  EXPECT_TRUE(paged == expected) << "get_job pages gave " << paged.size() << " bytes";
  EXPECT_GT(pages, 1u);

  auto r = hearth_cli(c_, "job " + std::to_string(acc->job_id) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto detail = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(detail.is_discarded()) << r.out.substr(0, 500);
  EXPECT_TRUE(detail["output"] == expected)
      << "hearth job --json printed " << detail["output"].dump().size() << " bytes of output";
  r = hearth_cli(c_, "job " + std::to_string(acc->job_id));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(big_token(n_tokens - 1).substr(0, 99)), std::string::npos)
      << "hearth job prints the output to its end";
  r = hearth_cli(c_, "watch " + std::to_string(acc->job_id));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.substr(0, expected.size()) == expected)
      << "hearth watch printed " << r.out.size() << " bytes";
}

// A job whose output passes the broker's max_output_bytes ends failed with output_too_large, and
// its node is told to stop it.
TEST_F(durability_test, an_output_past_max_output_bytes_fails_the_job_and_cancels_it) {
  c_.broker_settings({{"max_output_bytes", "65536"}});
  auto broker = c_.start_broker();
  auto node = c_.start_node("runaway", c_.models("m", {"alpha"}), "null", 1,
                            {"--null-tokens-per-s", "20000"});
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 1)) << broker.log();
  // 200,000 tokens of 2 to 7 bytes: about 900 KB, 10 s at 20,000 a second.
  auto acc = client.request<wire::accepted>(job("alpha", "on and on", 200000));
  ASSERT_TRUE(acc);
  auto d = client.wait_final(acc->job_id, 30s);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->summary.state, wire::job_state::failed);
  EXPECT_NE((d->summary.error + d->summary.stop_reason).find("output_too_large"), std::string::npos)
      << "error '" << d->summary.error << "', stop reason '" << d->summary.stop_reason << "'";
  EXPECT_LT(d->summary.n_gen, 200000u);
  EXPECT_LE(output_by_pages(client, acc->job_id).size(), 65536u);
  const std::string cancel_line = "job " + std::to_string(acc->job_id) + " attempt 1: cancel";
  EXPECT_TRUE(wait_until([&] { return node.log().find(cancel_line) != std::string::npos; }, 5s))
      << "the node was told to cancel:\n"
      << node.log();
  // The node is free for the next job.
  ASSERT_NO_FATAL_FAILURE(
      testing::expect_completes(client, job("alpha", "short", 10), [&] { return node.log(); }));
}

// --- retention ---------------------------------------------------------------------------------

// retention: in the broker's YAML deletes finished jobs by itself, keeping the newest keep_last,
// and never a queued or running one.
TEST_F(durability_test, retention_keeps_the_newest_finished_jobs_and_no_others) {
  c_.broker_settings({{"retention", "{keep_last: 3}"}});
  auto broker = c_.start_broker();
  auto node = c_.start_node("keeper", c_.models("m", {"alpha"}), "null", 1);
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 1)) << broker.log();
  std::vector<uint64_t> ids;
  for (int i = 0; i < 8; ++i) {
    auto a = client.request<wire::accepted>(job("alpha", "job " + std::to_string(i), 4));
    ASSERT_TRUE(a);
    ids.push_back(a->job_id);
  }
  for (uint64_t id : ids) ASSERT_TRUE(client.wait_final(id));
  // A job that stays queued (no node serves its model) is not finished, so it is kept.
  auto waiting = client.request<wire::accepted>([] {
    auto m = job("nobody-serves-this", "wait", 4);
    m.wait_model = true;
    return m;
  }());
  ASSERT_TRUE(waiting);
  auto listed = [&] {
    auto r = client.request<wire::jobs_reply>(wire::list_jobs{0, "", "", 100});
    std::vector<uint64_t> out;
    if (r) {
      for (const auto& j : r->jobs) out.push_back(j.job_id);
    }
    return out;
  };
  const std::vector<uint64_t> expected = {waiting->job_id, ids[7], ids[6], ids[5]};
  EXPECT_TRUE(wait_until([&] { return listed() == expected; }, 10s))
      << "listed " << ::testing::PrintToString(listed()) << "\n"
      << broker.log();
  std::string err;
  EXPECT_FALSE(client.request<wire::job_reply>(wire::get_job{0, ids[0]}, &err));
  EXPECT_NE(err.find("not_found"), std::string::npos) << err;
}

// --- 6. the WAL stays bounded ----------------------------------------------------------------

// A null-engine node streams as fast as it can, job after job, for 20 s and until 8 MiB have
// streamed (a loaded machine takes longer to stream them: the amount is what the test is about,
// not the rate); the -wal file's size, sampled every 100 ms, stays under the bound (the store's
// wal_limit, 64 MiB by default), and the main database file grows: checkpoints move the WAL's
// pages into it while the broker writes.
TEST_F(durability_test, the_wal_stays_bounded_while_jobs_stream) {
  constexpr uint64_t wal_bound = uint64_t(64) << 20;
  auto broker = c_.start_broker();
  auto node =
      c_.start_node("fast", c_.models("m", {"alpha"}), "null", 4, {"--null-tokens-per-s", "0"});
  auto client_ptr = c_.client();
  auto& client = *client_ptr;
  ASSERT_TRUE(nodes_online(client, 1)) << broker.log();
  const std::string wal = c_.db() + "-wal";
  const uint64_t db_at_start = file_size(c_.db());

  std::vector<uint64_t> ids;
  auto keep_busy = [&] {
    auto running = client.request<wire::jobs_reply>(wire::list_jobs{0, "running", "", 100});
    auto queued = client.request<wire::jobs_reply>(wire::list_jobs{0, "queued", "", 100});
    const size_t busy = (running ? running->jobs.size() : 0) + (queued ? queued->jobs.size() : 0);
    for (size_t i = busy; i < 8; ++i) {
      // The most tokens a job may ask for: it streams until cancelled.
      auto a = client.request<wire::accepted>(
          job("alpha", "stream " + std::to_string(ids.size()), 1 << 20));
      if (a) ids.push_back(a->job_id);
    }
  };
  auto streamed = [&] {
    uint64_t bytes = 0;
    for (auto id : ids) {
      wire::get_job g;
      g.job_id = id;
      g.max_output_bytes = 1;
      if (auto r = client.request<wire::job_reply>(g)) bytes += r->output_total_bytes;
    }
    return bytes;
  };
  constexpr uint64_t enough = uint64_t(8) << 20;
  uint64_t wal_max = 0, samples = 0;
  const auto start = steady::now();
  for (int tick = 0;; ++tick) {
    const auto elapsed = steady::now() - start;
    if (tick % 20 == 0 && elapsed >= 20s && streamed() >= enough) break;
    if (elapsed >= 180s) break;
    if (tick % 10 == 0) keep_busy();
    wal_max = std::max(wal_max, file_size(wal));
    ++samples;
    std::this_thread::sleep_for(100ms);
  }
  const uint64_t output_bytes = streamed();
  for (auto id : ids) client.request<wire::ok>(wire::cancel{0, id});
  const uint64_t db_at_end = file_size(c_.db());
  std::printf("WAL bound while streaming:\n");
  record("samples", samples);
  record("jobs", ids.size());
  record("output_bytes", output_bytes);
  record("wal_max_bytes", wal_max);
  record("db_start_bytes", db_at_start);
  record("db_end_bytes", db_at_end);
  EXPECT_TRUE(broker.running());
  EXPECT_GT(samples, 100u);
  EXPECT_GE(output_bytes, enough) << "the jobs streamed (3 minutes were not enough)";
  EXPECT_LE(wal_max, wal_bound);
  EXPECT_GT(db_at_end, db_at_start + output_bytes / 2)
      << "checkpoints copied the output into the database file while it streamed";
}

}  // namespace
}  // namespace hearth
