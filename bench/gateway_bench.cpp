// gateway_bench: what the HTTP gateway costs over the broker's own ZeroMQ path, on loopback with
// the real hearth-broker (keys on, durability full), hearth-node (null engine) and
// hearth-gateway processes (tests/cluster.h starts them). Three figures, each beside the same
// work done through ZeroMQ:
//
//   1. 1-token completions per second: `wrk` (Debian's) POSTs /v1/completions with max_tokens 1
//      over C keep-alive connections; beside it, C ZeroMQ clients each submitting a 1-token job
//      and waiting for its job_done, in the same closed loop. Latency p50/p99 of both.
//   2. Streamed tokens per second: S streaming requests (SSE) of N tokens at once from a node
//      that generates as fast as it can; beside it, S ZeroMQ watchers of S such jobs.
//   3. The latency the gateway adds per token: one job at R tokens/s followed both through the
//      gateway (SSE) and by a ZeroMQ watcher on its own thread; for every chunk, the time its
//      last byte arrived over HTTP minus the time it arrived over ZeroMQ (the target:
//      at most 1 ms at p99).
//
// Nothing is asserted on timing; the exit status is 1 only when something failed (a request
// that was not answered 200, a stream that did not end with [DONE], a child that died).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/cluster.h"

namespace {

using namespace hearth;
using namespace hearth::testing;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct options {
  int seconds = 10;
  int connections = 16;
  int streams = 8;
  int stream_tokens = 2000;
  int rate = 1000;  // tokens/s of the job whose per-token latency is measured
  int latency_tokens = 3000;
  bool json = false;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "gateway_bench: %s\n", why.c_str());
  std::exit(1);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

double ms_since(clock_type::time_point t0, clock_type::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// A blocking HTTP/1.1 client on one keep-alive connection: enough for a benchmark that controls
// both ends (Content-Length or chunked answers, SSE events).
class http_conn {
 public:
  explicit http_conn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("cannot connect");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~http_conn() { ::close(fd_); }

  void post(const std::string& path, const std::string& body) {
    const std::string req = "POST " + path +
                            " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                            "Content-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    for (size_t off = 0; off < req.size();) {
      const ssize_t n = ::send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n <= 0) fail("send failed");
      off += size_t(n);
    }
  }

  // The status and headers of the answer (lower-case header names).
  int read_head(std::string& headers) {
    const size_t end = until("\r\n\r\n");
    headers = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    std::transform(headers.begin(), headers.end(), headers.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return std::atoi(headers.c_str() + 9);
  }

  // A whole non-streamed answer: its status and body.
  std::pair<int, std::string> read_answer() {
    std::string headers;
    const int status = read_head(headers);
    if (const size_t at = headers.find("content-length:"); at != std::string::npos) {
      const size_t n = std::stoul(headers.substr(at + 15));
      while (buf_.size() < n) fill();
      std::string body = buf_.substr(0, n);
      buf_.erase(0, n);
      return {status, body};
    }
    std::string body;
    while (auto chunk = next_chunk()) body += *chunk;
    return {status, body};
  }

  // The next piece of a chunked body; nullopt at its end.
  std::optional<std::string> next_chunk() {
    const size_t eol = until("\r\n");
    const size_t n = std::stoul(buf_.substr(0, eol), nullptr, 16);
    buf_.erase(0, eol + 2);
    while (buf_.size() < n + 2) fill();
    std::string data = buf_.substr(0, n);
    buf_.erase(0, n + 2);
    if (n == 0) return std::nullopt;
    return data;
  }

 private:
  size_t until(const char* marker) {
    for (;;) {
      if (auto at = buf_.find(marker); at != std::string::npos) return at;
      fill();
    }
  }
  void fill() {
    char tmp[65536];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) fail("the gateway closed the connection");
    buf_.append(tmp, size_t(n));
  }
  int fd_ = -1;
  std::string buf_;
};

std::string completion_body(int max_tokens, bool stream, const std::string& model = "bench") {
  return nlohmann::json{{"model", model},
                        {"prompt", "Once upon a time"},
                        {"max_tokens", max_tokens},
                        {"temperature", 0},
                        {"stream", stream}}
      .dump();
}

// The text of each SSE event of a streamed completion, with the time its chunk arrived; stops at
// [DONE].
struct sse_piece {
  std::string text;
  clock_type::time_point at;
};

std::vector<sse_piece> read_stream(http_conn& h, uint64_t* job_id = nullptr,
                                   std::atomic<uint64_t>* job_id_out = nullptr) {
  std::string headers;
  if (int status = h.read_head(headers); status != 200)
    fail("stream answered " + std::to_string(status));
  std::vector<sse_piece> pieces;
  std::string pending;
  while (auto chunk = h.next_chunk()) {
    const auto at = clock_type::now();
    pending += *chunk;
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;  // a keep-alive comment
      const std::string data = event.substr(6);
      if (data == "[DONE]") return pieces;
      auto j = nlohmann::json::parse(data);
      if (job_id && *job_id == 0) {
        const std::string id = j["id"].get<std::string>();
        *job_id = std::stoull(id.substr(id.find('-') + 1));
        if (job_id_out) job_id_out->store(*job_id);
      }
      if (!j["choices"].empty()) pieces.push_back({j["choices"][0]["text"].get<std::string>(), at});
    }
  }
  fail("a stream ended without [DONE]");
}

struct closed_loop {
  double per_s = 0;
  double p50_ms = 0, p99_ms = 0;
};

// C ZeroMQ clients, each submitting a 1-token job and waiting for its job_done, for `seconds`.
closed_loop zmq_one_token_jobs(cluster& c, const options& o) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(size_t(o.connections));
  std::vector<std::thread> threads;
  for (int i = 0; i < o.connections; ++i) {
    threads.emplace_back([&, i] {
      auto cl = c.client("client", "zmq" + std::to_string(i));
      while (!stop) {
        auto s = greedy_job("bench", "Once upon a time", 1);
        s.watch = true;
        const auto t0 = clock_type::now();
        auto acc = cl->request<wire::accepted>(s);
        if (!acc) fail("a submit was refused");
        if (!cl->follow(acc->job_id, 30s).done) fail("a job did not finish");
        lat[size_t(i)].push_back(ms_since(t0, clock_type::now()));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(o.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  return {double(all.size()) / o.seconds, percentile(all, 0.5), percentile(all, 0.99)};
}

// wrk against /v1/completions (1 token, not streamed), parsed from its --latency report.
closed_loop wrk_one_token_completions(const temp_dir& dir, uint16_t port, const options& o) {
  const std::string script = dir.file("completion.lua");
  std::ofstream(script) << "wrk.method = \"POST\"\n"
                        << "wrk.headers[\"Content-Type\"] = \"application/json\"\n"
                        << "wrk.body = '" << completion_body(1, false) << "'\n"
                        << "done = function(summary, latency, requests)\n"
                        << "  io.write(string.format(\"bench: %d %d %f %f\\n\", summary.requests,"
                        << " summary.errors.status + summary.errors.connect + summary.errors.read"
                        << " + summary.errors.write + summary.errors.timeout,"
                        << " latency:percentile(50) / 1000, latency:percentile(99) / 1000))\n"
                        << "end\n";
  const std::string out = dir.file("wrk.out");
  const std::string cmd =
      "wrk -t2 -c" + std::to_string(o.connections) + " -d" + std::to_string(o.seconds) + "s -s " +
      script + " http://127.0.0.1:" + std::to_string(port) + "/v1/completions > " + out + " 2>&1";
  if (std::system(cmd.c_str()) != 0) fail("wrk failed (is Debian's wrk installed?): " + cmd);
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long requests = 0, errors = 0;
    double p50 = 0, p99 = 0;
    if (std::sscanf(line.c_str(), "bench: %llu %llu %lf %lf", &requests, &errors, &p50, &p99) ==
        4) {
      if (errors > 0) fail(std::to_string(errors) + " wrk requests failed (see " + out + ")");
      return {double(requests) / o.seconds, p50, p99};
    }
  }
  fail("no summary in wrk's output " + out);
}

// S streams of N tokens at once, through the gateway or ZeroMQ watchers: tokens/s in all.
double streamed_tokens_per_s(cluster& c, uint16_t port, const options& o, bool http) {
  std::atomic<uint64_t> bytes{0};
  std::vector<std::thread> threads;
  const auto t0 = clock_type::now();
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      if (http) {
        http_conn h(port);
        h.post("/v1/completions", completion_body(o.stream_tokens, true));
        for (auto& p : read_stream(h)) bytes += p.text.size();
      } else {
        auto cl = c.client("client", "stream" + std::to_string(i));
        auto s = greedy_job("bench", "Once upon a time", o.stream_tokens);
        s.watch = true;
        auto acc = cl->request<wire::accepted>(s);
        if (!acc) fail("a submit was refused");
        auto r = cl->follow(acc->job_id, 60s);
        if (!r.done) fail("a streamed job did not finish");
        bytes += r.text.size();
      }
    });
  }
  for (auto& t : threads) t.join();
  // The null engine's tokens are a few bytes each: count tokens as the jobs asked for them.
  (void)bytes;
  return double(o.streams) * o.stream_tokens / (ms_since(t0, clock_type::now()) / 1000);
}

struct added_latency {
  size_t chunks = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// One job at o.rate tokens/s followed through the gateway and by a ZeroMQ watcher at once.
added_latency per_token_latency(cluster& c, uint16_t port, const options& o) {
  std::atomic<uint64_t> job_id{0};
  std::vector<sse_piece> over_http;
  std::thread http_side([&] {
    http_conn h(port);
    h.post("/v1/completions", completion_body(o.latency_tokens, true, "paced"));
    uint64_t id = 0;
    over_http = read_stream(h, &id, &job_id);
  });
  while (job_id == 0) std::this_thread::sleep_for(1ms);
  // The watcher attaches after the first tokens: it gets those as one catch-up page, then each
  // chunk as the node sends it. Compare from the byte where both see chunks alike.
  auto cl = c.client("admin", "watcher");  // the job is the gateway's: an admin may watch it
  std::vector<std::pair<uint64_t, clock_type::time_point>> over_zmq;  // end offset, arrival
  uint64_t offset = 0;
  if (!cl->request<wire::ok>(wire::watch{0, job_id.load()})) fail("the watch was refused");
  for (;;) {
    auto ev = cl->next_event(10s);
    if (!ev) fail("the ZeroMQ watcher got nothing for 10 s");
    const auto at = clock_type::now();
    if (ev->cmd == wire::command::job_tokens) {
      auto t = wire::decode<wire::job_tokens>(ev->body);
      if (!t) fail("a malformed job_tokens");
      offset += t->text.size();
      over_zmq.push_back({offset, at});
    } else if (ev->cmd == wire::command::job_done) {
      break;
    }
  }
  http_side.join();
  // For each ZeroMQ chunk after the first two (the catch-up page and its successor), the HTTP
  // event that completes the same byte offset.
  std::vector<double> added;
  uint64_t http_offset = 0;
  size_t hi = 0;
  for (size_t zi = 2; zi < over_zmq.size(); ++zi) {
    const auto [end, at_zmq] = over_zmq[zi];
    while (hi < over_http.size() && http_offset + over_http[hi].text.size() < end) {
      http_offset += over_http[hi].text.size();
      ++hi;
    }
    if (hi >= over_http.size()) break;
    if (http_offset + over_http[hi].text.size() != end) continue;  // chunked differently
    added.push_back(ms_since(at_zmq, over_http[hi].at));
  }
  return {added.size(), percentile(added, 0.5), percentile(added, 0.99),
          added.empty() ? 0 : *std::max_element(added.begin(), added.end())};
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"gateway_bench: the HTTP gateway beside the broker's ZeroMQ path"};
  app.add_option("--seconds", o.seconds, "length of each closed-loop run");
  app.add_option("--connections", o.connections, "concurrent clients of the closed loops");
  app.add_option("--streams", o.streams, "concurrent streams of the tokens/s run");
  app.add_option("--stream-tokens", o.stream_tokens, "tokens per stream");
  app.add_option("--rate", o.rate, "tokens/s of the job whose per-token latency is measured");
  app.add_option("--latency-tokens", o.latency_tokens, "tokens of that job");
  app.add_flag("--json", o.json, "one JSON object instead of the table");
  CLI11_PARSE(app, argc, argv);

  cluster c;
  auto broker = c.start_broker();
  // Two nodes of the null engine, each serving its own model name: "bench" as fast as it can
  // (closed loops, tokens/s), "paced" at a fixed rate (the latency run).
  auto fast = c.start_node("fast", c.models("fast-models", {"bench"}), "null", 64,
                           {"--null-tokens-per-s", "0"});
  auto paced = c.start_node("paced", c.models("paced-models", {"paced"}), "null", 4,
                            {"--null-tokens-per-s", std::to_string(o.rate)});
  if (!nodes_online(*c.client("admin"), 2)) fail("the nodes did not register:\n" + broker.log());
  const uint16_t port = uint16_t(free_port());
  const auto gw_keys = c.key_args("client", "gateway");
  std::vector<std::string> gw = {HEARTH_GATEWAY_BIN,
                                 "--listen",
                                 "127.0.0.1:" + std::to_string(port),
                                 "--broker",
                                 c.endpoint(),
                                 "--db",
                                 c.dir().file("gateway.db"),
                                 "--log-level",
                                 "warn"};
  gw.insert(gw.end(), gw_keys.begin(), gw_keys.end());
  auto gateway = spawn(gw, c.dir().file("gateway.log"));
  for (int i = 0; i < 100; ++i) {
    if (std::system(("curl -sf http://127.0.0.1:" + std::to_string(port) + "/health > /dev/null")
                        .c_str()) == 0)
      break;
    std::this_thread::sleep_for(100ms);
  }

  if (!gateway.running()) fail("the gateway did not start:\n" + gateway.log());
  const closed_loop zmq = zmq_one_token_jobs(c, o);
  const closed_loop http = wrk_one_token_completions(c.dir(), port, o);
  const double zmq_tokens = streamed_tokens_per_s(c, port, o, false);
  const double http_tokens = streamed_tokens_per_s(c, port, o, true);

  const added_latency lat = per_token_latency(c, port, o);
  if (!gateway.running()) fail("the gateway died:\n" + gateway.log());

  if (o.json) {
    nlohmann::json j = {
        {"one_token",
         {{"zmq_per_s", zmq.per_s},
          {"zmq_p50_ms", zmq.p50_ms},
          {"zmq_p99_ms", zmq.p99_ms},
          {"http_per_s", http.per_s},
          {"http_p50_ms", http.p50_ms},
          {"http_p99_ms", http.p99_ms}}},
        {"streamed_tokens_per_s", {{"zmq", zmq_tokens}, {"http", http_tokens}}},
        {"added_latency_ms",
         {{"chunks", lat.chunks}, {"p50", lat.p50_ms}, {"p99", lat.p99_ms}, {"max", lat.max_ms}}}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf(
      "hearth gateway bench (%d connections, %d s per closed loop; keys on, durability full)\n",
      o.connections, o.seconds);
  std::printf("%-44s %14s %14s\n", "", "ZeroMQ", "HTTP gateway");
  std::printf("%-44s %14.0f %14.0f\n", "1-token jobs/s (closed loop)", zmq.per_s, http.per_s);
  std::printf("%-44s %14.2f %14.2f\n", "  latency p50 ms", zmq.p50_ms, http.p50_ms);
  std::printf("%-44s %14.2f %14.2f\n", "  latency p99 ms", zmq.p99_ms, http.p99_ms);
  std::printf("%-44s %14.0f %14.0f\n",
              ("streamed tokens/s (" + std::to_string(o.streams) + " streams)").c_str(), zmq_tokens,
              http_tokens);
  std::printf(
      "added per token by the gateway (%zu chunks at %d tokens/s): p50 %.3f ms, p99 %.3f ms, "
      "max %.3f ms (target: p99 <= 1 ms)\n",
      lat.chunks, o.rate, lat.p50_ms, lat.p99_ms, lat.max_ms);
  return 0;
}
