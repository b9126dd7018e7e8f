// What one client may cost the broker (schema/PROTOCOL.md section 10.6), with real processes on
// loopback: a client that never reads its replies is dropped while the broker's memory stays
// bounded and other clients are served; per-client and global limits on unfinished jobs; and
// a job whose output is larger than any one message, read back whole through the pages of
// get_job, the chunks of watch and the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/cluster.h"
#include "tests/fake-node.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;

// About `bytes` of text with characters of 1 to 4 bytes, so that page and chunk boundaries fall
// inside characters unless cut with care; in pieces of whole characters of about 512 KiB.
std::vector<std::string> big_output(size_t bytes) {
  const std::string unit = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93 \xF0\x9F\x98\x80 ";  // 22 bytes
  std::vector<std::string> pieces;
  size_t total = 0;
  while (total < bytes) {
    std::string p;
    while (p.size() < (512u << 10) && total + p.size() < bytes) p += unit;
    total += p.size();
    pieces.push_back(std::move(p));
  }
  return pieces;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

bool starts_a_character(std::string_view s) {
  return s.empty() || (uint8_t(s[0]) & 0xC0) != 0x80;
}

// A size line of /proc/PID/status ("VmRSS:", "VmHWM:") in bytes, 0 when unknown.
uint64_t status_bytes(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
  }
  return 0;
}

// Resident memory of process `pid` in bytes (VmRSS), 0 when unknown.
uint64_t rss_bytes(pid_t pid) {
  return status_bytes(pid, "VmRSS:");
}

// A submitted job of `model` that the fake node will run (wait_model: the node may come later).
wire::submit job_of(const std::string& model, std::string prompt) {
  auto s = testing::greedy_job(model, std::move(prompt), 1 << 20);
  s.wait_model = true;
  return s;
}

// A job of model "big" that `node` runs with about `bytes` of output, finished; its id (0 when
// something failed).
uint64_t finished_job(test_client& client, fake_node& node, size_t bytes) {
  auto acc = client.request<wire::accepted>(job_of("big", "hello"));
  if (!acc || node.run_one(big_output(bytes), 1000) != acc->job_id) return 0;
  return client.wait_final(acc->job_id) ? acc->job_id : 0;
}

// `hearth ARGS --broker ENDPOINT` with the cluster's default client key: stdout and exit code.
std::pair<int, std::string> run_cli(cluster& c, const std::string& args) {
  std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c.endpoint();
  for (const auto& a : c.key_args("client", "default")) cmd += " " + a;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, out};
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(BrokerClientLimits, a_job_larger_than_a_message_reads_back_whole_in_pages) {
  cluster c;
  auto broker = c.start_broker();
  auto client = c.client("client");
  fake_node node(c, "fake1");
  node.hello(1, {"big"});
  ASSERT_TRUE(node.welcomed()) << broker.log();

  auto s = job_of("big", "tell me everything");
  s.watch = true;
  auto acc = client->request<wire::accepted>(s);
  ASSERT_TRUE(acc);
  const auto pieces = big_output(5 << 20);  // past max_string_bytes: no one message could hold it
  const std::string text = joined(pieces);
  ASSERT_EQ(node.run_one(pieces, 1000), acc->job_id);
  auto streamed = client->follow(acc->job_id);
  ASSERT_TRUE(streamed.done) << broker.log();
  EXPECT_EQ(streamed.done->state, wire::job_state::completed);
  ASSERT_EQ(streamed.text.size(), text.size());
  EXPECT_TRUE(streamed.text == text);

  // get_job: default pages of at most 256 KiB that end on character boundaries.
  std::string paged;
  int pages = 0;
  while (true) {
    wire::get_job g{0, acc->job_id};
    g.output_offset = paged.size();
    auto r = client->request<wire::job_reply>(g);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->output_total_bytes, text.size());
    EXPECT_EQ(r->output_offset, paged.size());
    EXPECT_LE(r->job.output.size(), wire::job_page_bytes_default);
    EXPECT_TRUE(starts_a_character(r->job.output));
    EXPECT_EQ(r->job.prompt, "tell me everything");
    if (r->job.output.empty()) break;
    paged += r->job.output;
    ++pages;
    ASSERT_LT(pages, 100);
  }
  EXPECT_GE(pages, 20);
  EXPECT_TRUE(paged == text);
  // The stream and the pages, 10 MiB to one client, pass what the broker lets its pipe hold
  // (max_peer_outbox_bytes, 8 MiB): heartbeats made room as it read.
  EXPECT_GT(client->heartbeats(), 0u);
  // A page size of the client's choice, capped.
  wire::get_job small{0, acc->job_id};
  small.max_output_bytes = 1000;
  auto r = client->request<wire::job_reply>(small);
  ASSERT_TRUE(r);
  EXPECT_LE(r->job.output.size(), 1000u);
  EXPECT_GE(r->job.output.size(), 997u);
  small.max_output_bytes = 100 << 20;
  r = client->request<wire::job_reply>(small);
  ASSERT_TRUE(r);
  EXPECT_LE(r->job.output.size(), wire::job_page_bytes_max);

  // watch of the finished job: the output in chunks of at most 256 KiB, seq 0, the count last.
  auto watcher = c.client("client");  // the same key: a client watches its own jobs
  ASSERT_TRUE(watcher->request<wire::ok>(wire::watch{0, acc->job_id}));
  std::string caught_up;
  uint64_t n_tokens = 0;
  int chunks = 0;
  std::optional<wire::job_done> done;
  while (!done) {
    auto ev = watcher->next_event(5s);
    ASSERT_TRUE(ev);
    if (ev->cmd == wire::command::job_done) {
      done = wire::decode<wire::job_done>(ev->body).value();
    } else if (ev->cmd == wire::command::job_tokens) {
      auto t = wire::decode<wire::job_tokens>(ev->body);
      ASSERT_TRUE(t);
      EXPECT_EQ(t->seq, 0u);
      EXPECT_LE(t->text.size(), wire::job_page_bytes_default);
      EXPECT_TRUE(starts_a_character(t->text));
      EXPECT_EQ(n_tokens, 0u) << "only the last chunk carries the count";
      n_tokens = t->n_tokens;
      caught_up += t->text;
      ++chunks;
    }
  }
  EXPECT_GE(chunks, 20);
  EXPECT_EQ(n_tokens, streamed.done->n_gen);
  EXPECT_TRUE(caught_up == text);

  // The CLI reads every page: its JSON holds the whole output.
  auto [code, out] = run_cli(c, "job " + std::to_string(acc->job_id) + " --json");
  ASSERT_EQ(code, 0) << out.substr(0, 1000);
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["output"].get<std::string>().size(), text.size());
  EXPECT_TRUE(j["output"].get<std::string>() == text);
  EXPECT_EQ(j["prompt"], "tell me everything");
  EXPECT_TRUE(broker.running());
}

TEST(BrokerClientLimits, a_client_that_never_reads_is_dropped_and_the_broker_stays_small) {
  cluster c;
  c.broker_settings({{"peer_stall_ms", "2000"}});
  auto broker = c.start_broker();
  auto client = c.client("client");
  fake_node node(c, "fake1");
  node.hello(1, {"big"});
  ASSERT_TRUE(node.welcomed()) << broker.log();
  auto acc = client->request<wire::accepted>(job_of("big", "hello"));
  ASSERT_TRUE(acc);
  const std::string text = joined(big_output(3 << 20));
  ASSERT_EQ(node.run_one(big_output(3 << 20), 1000), acc->job_id);
  ASSERT_TRUE(client->wait_final(acc->job_id));
  const uint64_t rss_before = rss_bytes(broker.pid());
  ASSERT_GT(rss_before, 0u);

  // The reader asks for 3 MiB 300 times over by both routes and reads nothing. Its own socket
  // takes one message (rcvhwm 1), then the kernel's buffers fill, then the broker's.
  auto reader = c.client("client");  // the owner's key, on another connection
  reader->socket().set(zmq::sockopt::rcvhwm, 1);
  for (int i = 0; i < 300; ++i) {
    wire::get_job g{uint64_t(i + 1), acc->job_id};
    net::send(reader->socket(), "", g);
    net::send(reader->socket(), "", wire::watch{uint64_t(10000 + i), acc->job_id});
    // Spread over many turns of the broker, a few requests each, so that what ZeroMQ's pipe may
    // hold decides rather than one turn's share (CI once ran this where the broker kept up: the
    // reader was never dropped and its pipe held 150 MiB).
    std::this_thread::sleep_for(1ms);
  }

  // Meanwhile another client is answered, and the broker stays small. What it holds for the
  // reader (PROTOCOL.md section 10.6, broker.h "Sending"): in ZeroMQ's pipe at most
  // max_peer_outbox_bytes (8 MiB) of its last 1024 messages, which the broker counts, then at
  // most that again in its outbox, and one turn's messages, at most twice that: 32 MiB. ZeroMQ
  // itself counts messages, not bytes: without the broker's count the pipe would take 1024 of
  // these 256 KiB pages, 256 MiB. The 75 MiB the reader asks for cannot fit: whatever the timing
  // of the broker's turns, its outbox fills and it is dropped.
  // The first request waits for the turn that answers the reader until it is dropped: reading
  // and encoding 16 MiB of pages, a tenth of a second in a release build and several times that
  // under AddressSanitizer (1.1 s alone, 2 s on a loaded machine). A broker that waited for the
  // reader would never answer.
#if defined(__SANITIZE_ADDRESS__)
  const auto answered_within = 5s;
#else
  const auto answered_within = 1s;
#endif
  uint64_t rss_max = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    node.send(wire::heartbeat{});
    const auto t0 = std::chrono::steady_clock::now();
    auto r = client->request<wire::jobs_reply>(wire::list_jobs{});
    auto d = client->request<wire::job_reply>(wire::get_job{0, acc->job_id});
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(r && d) << broker.log().substr(0, 4000);
    EXPECT_LT(took, answered_within);
    rss_max = std::max(rss_max, rss_bytes(broker.pid()));
    std::this_thread::sleep_for(50ms);
  }
  // 32 MiB, the message ZeroMQ's I/O thread is writing, and the allocator's slack. Under
  // AddressSanitizer freed memory stays resident in its quarantine (256 MiB by default, and an
  // eighth of that again in shadow memory), so the bound there is that much looser; it is still
  // a bound (the broker before its pipe count reached 250 MiB without it).
  uint64_t allowed = 48u << 20;
#if defined(__SANITIZE_ADDRESS__)
  allowed += 288u << 20;
#endif
  EXPECT_LT(rss_max, rss_before + allowed)
      << "broker RSS before " << rss_before << ", at most " << rss_max;
  EXPECT_TRUE(wait_until([&] { return broker.log().find("dropped peer") != std::string::npos; }))
      << broker.log().substr(0, 4000);
  EXPECT_TRUE(broker.running());
  const std::string log = broker.log();
  const size_t at = log.find("dropped peer");
  if (at != std::string::npos) std::printf("%s\n", log.substr(at, log.find('\n', at) - at).c_str());
  std::printf("broker RSS %llu MiB before, at most %llu MiB while the reader did not read\n",
              static_cast<unsigned long long>(rss_before >> 20),
              static_cast<unsigned long long>(rss_max >> 20));
}

TEST(BrokerClientLimits, many_watchers_that_never_read_share_the_total_bound) {
  // Issue 52 (5): 500 connections (receive high-water mark 1) each watched a job with 6 MiB of
  // output and read nothing: the broker grew to 1,903 MiB, about 3.7 MiB a connection in
  // ZeroMQ's pipes, outside max_outbox_bytes (which counted only the outboxes), and list_models
  // went unanswered for 27 s. Here 250 of them against a total of 64 MiB.
  constexpr uint64_t total = 64u << 20;
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer each page's allocations are mmap'd and unmapped (its large-chunk
  // allocator), which on a paravirtualised machine made 250 watchers' catch-up take minutes; 100
  // watchers of 6 MiB are still nine times the total.
  constexpr int n_watchers = 100;
#else
  constexpr int n_watchers = 250;
#endif
  cluster c;
  c.broker_settings(
      {{"max_outbox_bytes", std::to_string(total)}, {"max_connections_per_address", "4096"}});
  auto broker = c.start_broker();
  auto client = c.client("client");
  fake_node node(c, "fake1");
  node.hello(1, {"big"});
  ASSERT_TRUE(node.welcomed()) << broker.log();
  const uint64_t job_id = finished_job(*client, node, 6 << 20);
  ASSERT_NE(job_id, 0u);
  const uint64_t rss_before = rss_bytes(broker.pid());
  ASSERT_GT(rss_before, 0u);

  zmq::context_t ctx;
  std::vector<zmq::socket_t> watchers;
  const auto keys = c.client_keys("client", "default");
  for (int i = 0; i < n_watchers; ++i) {
    zmq::socket_t& s = watchers.emplace_back(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::rcvhwm, 1);
    s.set(zmq::sockopt::linger, 0);
    net::curve_client_apply(s, keys);
    s.connect(c.endpoint());
    net::send(s, "", wire::watch{uint64_t(i + 1), job_id});
  }

  // A watcher that reads gets the whole output meanwhile: the ones that do not read are dropped
  // to make room for it.
  auto reader = c.client("client");  // the owner's key, on another connection
  ASSERT_TRUE(reader->request<wire::ok>(wire::watch{0, job_id}));
  const auto follow_start = std::chrono::steady_clock::now();
  const auto got = reader->follow(job_id, 60s);
  const double follow_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - follow_start).count();
  ASSERT_TRUE(got.done) << broker.log().substr(0, 4000);
  EXPECT_EQ(got.text.size(), joined(big_output(6 << 20)).size());

  // Another client is answered meanwhile (within a generous 10 s each: not a measure of speed).
  const auto until = std::chrono::steady_clock::now() + 10s;
  int answered = 0;
  while (std::chrono::steady_clock::now() < until) {
    node.send(wire::heartbeat{});
    auto m = client->request<wire::models_reply>(wire::list_models{});
    ASSERT_TRUE(m) << "list_models unanswered";
    ++answered;
    std::this_thread::sleep_for(200ms);
  }
  // What the broker holds for all peers together: max_outbox_bytes of outboxes and counted pipe
  // bytes, one turn's pages (within the same total), for each connection the message ZeroMQ's
  // I/O thread is writing (a page) and its buffers, and the allocator's slack (48 MiB, as
  // above). Under AddressSanitizer its quarantine keeps freed memory resident, so the bound
  // there is looser (as above). Measured: a peak 75-92 MiB over the RSS before; before issue 52,
  // 930-950.
  const uint64_t peak = status_bytes(broker.pid(), "VmHWM:");
  uint64_t allowed = total + n_watchers * uint64_t(wire::job_page_bytes_default) + (48u << 20);
#if defined(__SANITIZE_ADDRESS__)
  allowed += 288u << 20;
#endif
  EXPECT_LT(peak, rss_before + allowed) << "broker RSS before " << rss_before << ", peak " << peak;
  EXPECT_TRUE(broker.running());
  std::printf(
      "%d watchers that never read: broker RSS %llu MiB before, peak %llu MiB; a reader "
      "got the output in %.1f s; %d list_models answered\n",
      n_watchers, static_cast<unsigned long long>(rss_before >> 20),
      static_cast<unsigned long long>(peak >> 20), follow_s, answered);
}

TEST(BrokerClientLimits, a_slow_watcher_of_a_fast_stream_catches_up_in_pages) {
  cluster c;
  auto broker = c.start_broker();
  auto watcher = c.client("client", "slow");
  fake_node node(c, "fake1");
  node.hello(1, {"big"});
  ASSERT_TRUE(node.welcomed()) << broker.log();
  watcher->socket().set(zmq::sockopt::rcvhwm, 1);
  auto s = job_of("big", "stream");
  s.watch = true;
  auto acc = watcher->request<wire::accepted>(s);
  ASSERT_TRUE(acc);

  // 32,000 one-token chunks (16 MiB) while the watcher reads nothing: once ZeroMQ and the kernel
  // hold what they can, the broker stops queueing its chunks and later sends the rest in pages.
  const std::string unit = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93 \xF0\x9F\x98\x80 ";
  std::string piece;
  for (int i = 0; i < 23; ++i) piece += unit;
  const std::vector<std::string> pieces(32000, piece);
  ASSERT_EQ(node.run_one(pieces, 1), acc->job_id);
  std::this_thread::sleep_for(2s);

  std::string text;
  uint64_t next_seq = 0;
  size_t chunks = 0;
  std::optional<wire::job_done> done;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!done && std::chrono::steady_clock::now() < until) {
    auto ev = watcher->next_event(1s);
    if (!ev) continue;
    if (ev->cmd == wire::command::job_done) {
      done = wire::decode<wire::job_done>(ev->body).value();
    } else if (ev->cmd == wire::command::job_tokens) {
      auto t = wire::decode<wire::job_tokens>(ev->body);
      ASSERT_TRUE(t);
      ASSERT_EQ(t->seq, next_seq) << "chunk " << chunks;
      next_seq += t->n_tokens;
      text += t->text;
      ++chunks;
    }
  }
  ASSERT_TRUE(done) << broker.log().substr(0, 4000);
  EXPECT_EQ(done->state, wire::job_state::completed);
  EXPECT_EQ(next_seq, pieces.size());
  EXPECT_TRUE(text == joined(pieces));
  EXPECT_LT(chunks, pieces.size()) << "every chunk was queued for a watcher that did not read";
  EXPECT_EQ(broker.log().find("dropped"), std::string::npos) << broker.log().substr(0, 4000);
  std::printf("the slow watcher got %zu messages for the node's %zu chunks\n", chunks,
              pieces.size());
}

// A request that does not decode is refused malformed under its own request id when the body
// says it before what is wrong (trailing bytes, a string over the limits), so the client can tell
// which request it was. Before: request id 0.
TEST(BrokerClientLimits, a_malformed_request_is_refused_under_its_request_id) {
  cluster c;
  auto broker = c.start_broker();
  auto client = c.client("client");
  auto s = testing::greedy_job("alpha", "hello", 4);
  s.request_id = 4242;
  for (const auto& [what, body] :
       {std::pair<std::string, std::string>{"trailing bytes", wire::encode(s) + "\xc0"},
        {"a string over max_string_bytes",
         // {request_id: 4243, pad: <5 MiB string>}
         std::string("\x82\xaarequest_id\xcd\x10\x93\xa3pad\xdb") +
             std::string("\x00\x50\x00\x00", 4) + std::string(5 << 20, 'x')}}) {
    const uint64_t id = what == "trailing bytes" ? 4242 : 4243;
    auto r = client->request_raw(wire::command::submit, body, id, 5s);
    ASSERT_EQ(r.cmd, wire::command::error) << what << ": no reply under its id\n" << broker.log();
    auto e = wire::decode<wire::error_reply>(r.body);
    ASSERT_TRUE(e) << what;
    EXPECT_EQ(e->request_id, id) << what;
    EXPECT_EQ(e->code, wire::error_code::malformed) << what << ": " << e->message;
  }
}

TEST(BrokerClientLimits, unfinished_jobs_are_bounded_per_client_and_in_all) {
  cluster c;
  c.broker_settings({{"max_client_queued_jobs", "3"},
                     {"max_client_queued_bytes", "300000"},
                     {"max_queue_bytes", "250000"}});
  auto broker = c.start_broker();
  auto client = c.client("client");
  std::string err;
  auto first = client->request<wire::accepted>(job_of("nowhere", std::string(200000, 'a')), &err);
  ASSERT_TRUE(first) << err << broker.log();

  // Under the client's bytes, over all clients' bytes: queue_full naming max_queue_bytes.
  EXPECT_FALSE(client->request<wire::accepted>(job_of("nowhere", std::string(60000, 'b')), &err));
  EXPECT_EQ(err.rfind("queue_full:", 0), 0u) << err;
  EXPECT_NE(err.find("max_queue_bytes is 250000"), std::string::npos) << err;
  // Over the client's bytes: limit_reached naming max_client_queued_bytes.
  EXPECT_FALSE(client->request<wire::accepted>(job_of("nowhere", std::string(120000, 'c')), &err));
  EXPECT_EQ(err.rfind("limit_reached:", 0), 0u) << err;
  EXPECT_NE(err.find("max_client_queued_bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("300000"), std::string::npos) << err;

  // The (N+1)th unfinished job: limit_reached naming max_client_queued_jobs and its value.
  ASSERT_TRUE(client->request<wire::accepted>(job_of("nowhere", "two"), &err)) << err;
  ASSERT_TRUE(client->request<wire::accepted>(job_of("nowhere", "three"), &err)) << err;
  EXPECT_FALSE(client->request<wire::accepted>(job_of("nowhere", "four"), &err));
  EXPECT_EQ(err.rfind("limit_reached:", 0), 0u) << err;
  EXPECT_NE(err.find("max_client_queued_jobs"), std::string::npos) << err;
  EXPECT_NE(err.find("the limit is 3"), std::string::npos) << err;

  // A finished job no longer counts.
  ASSERT_TRUE(client->request<wire::ok>(wire::cancel{0, first->job_id}, &err)) << err;
  EXPECT_TRUE(wait_until([&] {
    return client->request<wire::accepted>(job_of("nowhere", std::string(100000, 'd')), &err)
        .has_value();
  })) << err;
  EXPECT_TRUE(broker.running());
}

}  // namespace
}  // namespace hearth::testing
