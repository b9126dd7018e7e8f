// The HTTP server over real sockets: raw clients that send exact bytes (and misbehave), and
// curl. Each test runs a server on 127.0.0.1 with a free port on its own thread.
#include "gateway/http-server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

namespace hearth::gateway {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A server on 127.0.0.1:<free port>, serving on its own thread until the test ends.
struct test_server {
  gateway_options options;
  router routes;
  std::unique_ptr<http_server> server;
  std::atomic<bool> stop{false};
  std::thread thread;

  explicit test_server(gateway_options o = {}) : options(std::move(o)) {
    if (options.listen == gateway_options{}.listen) options.listen = "127.0.0.1:0";
  }
  void start(authenticate_fn auth = {}) {
    server = std::make_unique<http_server>(options, routes, std::move(auth));
    thread = std::thread([this] { server->run(stop); });
    auto deadline = clock_type::now() + 10s;
    while (!server->bound() && clock_type::now() < deadline) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(server->bound());
  }
  uint16_t port() const { return server->port(); }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  // Runs `f` on the I/O thread and waits for it.
  template <class F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    server->post([&task] { task(); });
    return result.get();
  }
  ~test_server() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

// A TCP client that sends exactly what a test says and reads exactly what comes back.
class raw_client {
 public:
  // `source`: the client's own address (another address of 127.0.0.0/8 is another client).
  explicit raw_client(uint16_t port, int rcvbuf = 0, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (source) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~raw_client() {
    if (fd_ >= 0) ::close(fd_);
  }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads what arrives within `wait`; stops at EOF (then eof() is true).
  std::string read_some(std::chrono::milliseconds wait = 10s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
    char b[65536];
    ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      eof_ = true;
      return {};
    }
    return std::string(b, static_cast<size_t>(n));
  }

  // Reads until `text` has arrived (in what was read since the last call), EOF, or `wait`.
  std::string read_until(std::string_view text, std::chrono::milliseconds wait = 10s) {
    auto deadline = clock_type::now() + wait;
    while (pending_.find(text) == std::string::npos && !eof_ && clock_type::now() < deadline)
      pending_ += read_some(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()));
    size_t at = pending_.find(text);
    size_t end = at == std::string::npos ? pending_.size() : at + text.size();
    std::string out = pending_.substr(0, end);
    pending_.erase(0, end);
    return out;
  }

  // Sends `request` and reads the whole response to it.
  std::string round_trip(const std::string& request) {
    send(request);
    return read_response();
  }

  // One whole response with a Content-Length body.
  std::string read_response(std::chrono::milliseconds wait = 10s) {
    std::string head = read_until("\r\n\r\n", wait);
    size_t cl = head.find("Content-Length: ");
    if (cl == std::string::npos) return head;
    size_t length = std::stoul(head.substr(cl + 16));
    auto deadline = clock_type::now() + wait;
    while (pending_.size() < length && !eof_ && clock_type::now() < deadline)
      pending_ += read_some(1s);
    std::string body = pending_.substr(0, std::min(length, pending_.size()));
    pending_.erase(0, body.size());
    return head + body;
  }

  // Everything until the server closes the connection (or `wait`).
  std::string read_to_eof(std::chrono::milliseconds wait = 10s) {
    auto deadline = clock_type::now() + wait;
    std::string out = std::move(pending_);
    pending_.clear();
    while (!eof_ && clock_type::now() < deadline) out += read_some(100ms);
    return out;
  }

  bool eof() const { return eof_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string pending_;
};

std::string body_of(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

// Runs a shell command, returns its stdout.
std::string shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char b[4096];
  size_t n;
  while ((n = std::fread(b, 1, sizeof b, p)) > 0) out.append(b, n);
  ::pclose(p);
  return out;
}

http_response text(std::string body, int status = 200) {
  http_response r;
  r.status = status;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

// A handler answering "METHOD path params query-x body".
handler echo() {
  return [](std::shared_ptr<exchange> ex) {
    std::string params;
    for (auto& [k, v] : ex->params) params += k + "=" + v + ";";
    ex->out->reply(text(ex->request.method + " " + ex->request.path + " " + params + " " +
                        ex->request.query_param("x") + " " + ex->request.body));
  };
}

// A handler answering the request's body.
handler body_echo() {
  return [](std::shared_ptr<exchange> ex) { ex->out->reply(text(ex->request.body)); };
}

// A started server with options `o` and the one route `method path` -> `h`.
std::unique_ptr<test_server> serving(gateway_options o, std::string method, std::string path,
                                     handler h = echo()) {
  auto s = std::make_unique<test_server>(std::move(o));
  s->routes.add(std::move(method), std::move(path), std::move(h));
  s->start();
  return s;
}

gateway_options with_body_limit(uint64_t bytes) {
  gateway_options o;
  o.max_body_bytes = bytes;
  return o;
}

// Waits (up to `limit`) until `done()`; says whether it came.
template <class F>
bool wait_until(F done, std::chrono::milliseconds limit = 10s) {
  auto deadline = clock_type::now() + limit;
  while (!done() && clock_type::now() < deadline) std::this_thread::sleep_for(10ms);
  return done();
}

TEST(http_server, routes_requests_and_keeps_the_connection_alive) {
  test_server s;
  s.routes.add("GET", "/v1/models", echo());
  s.routes.add("GET", "/v1/models/{id}", echo());
  s.routes.add("POST", "/v1/chat/completions", echo());
  s.start();

  raw_client c(s.port());
  ASSERT_TRUE(c.connected());
  auto r = c.round_trip("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "GET /v1/models   ");
  // The same connection, a parameter, a percent-encoded path and a query.
  r = c.round_trip("GET /v1/models/llama%2F3%20b?x=a+b%21 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(body_of(r), "GET /v1/models/llama/3 b id=llama/3 b; a b! ");
  r = c.round_trip(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}");
  EXPECT_EQ(body_of(r), "POST /v1/chat/completions   {\"a\":1}");
  EXPECT_FALSE(c.eof());
  EXPECT_EQ(s.server->connections(), 1u);
}

TEST(http_server, answers_404_and_405_in_openai_shape) {
  test_server s;
  s.routes.add("POST", "/v1/chat/completions", echo());
  s.start();
  raw_client c(s.port());
  auto r = c.round_trip("GET /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(r), 404) << r;
  auto j = nlohmann::json::parse(body_of(r));
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("/v1/nothing"), std::string::npos);
  r = c.round_trip("GET /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(r), 405) << r;
  j = nlohmann::json::parse(body_of(r));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_FALSE(c.eof());  // no body was left unread: the connection stays
}

TEST(http_server, http_1_0_gets_its_answer_and_the_connection_closes) {
  test_server s;
  s.routes.add("GET", "/health", echo(), {.is_public = true});
  s.start();
  raw_client c(s.port());
  c.send("GET /health HTTP/1.0\r\n\r\n");
  auto r = c.read_to_eof();
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "GET /health   ");
  EXPECT_TRUE(c.eof());
}

// The SSE framing, byte for byte, chunked encoding included.
TEST(http_server, streams_server_sent_events_byte_exact) {
  test_server s;
  s.routes.add("POST", "/stream", [&](std::shared_ptr<exchange> ex) {
    ex->out->start_events();
    ex->out->event(R"({"id":"c1","choices":[{"delta":{"role":"assistant"}}]})");
    ex->out->comment("keep-alive");
    // Later, from a timer, as a broker event would come.
    s.server->after(20ms, [ex] {
      ex->out->event("two\nlines");
      ex->out->event("[DONE]");
      ex->out->end_events();
    });
  });
  s.routes.add("GET", "/after", echo());
  s.start();
  raw_client c(s.port());
  c.send("POST /stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
  std::string got = c.read_until("0\r\n\r\n");
  std::string e1 = "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n";
  std::string expected =
      "HTTP/1.1 200 OK\r\n"
      "Content-Type: text/event-stream\r\n"
      "Cache-Control: no-cache\r\n"
      "Transfer-Encoding: chunked\r\n"
      "Connection: keep-alive\r\n"
      "\r\n" +
      [](size_t n) {
        char b[16];
        std::snprintf(b, sizeof b, "%zx", n);
        return std::string(b);
      }(e1.size()) +
      "\r\n" + e1 +
      "\r\n"
      "e\r\n: keep-alive\n\n\r\n"
      "17\r\ndata: two\ndata: lines\n\n\r\n"
      "e\r\ndata: [DONE]\n\n\r\n"
      "0\r\n\r\n";
  EXPECT_EQ(got, expected);
  // The connection is reused after the stream.
  c.send("GET /after HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
}

TEST(http_server, streams_events_to_http_1_0_without_chunks_and_then_closes) {
  test_server s;
  s.routes.add("GET", "/stream", [](std::shared_ptr<exchange> ex) {
    ex->out->start_events();
    ex->out->event("a");
    ex->out->event("[DONE]");
    ex->out->end_events();
  });
  s.start();
  raw_client c(s.port());
  c.send("GET /stream HTTP/1.0\r\n\r\n");
  auto got = c.read_to_eof();
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(got,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Connection: close\r\n\r\ndata: a\n\ndata: [DONE]\n\n");
}

TEST(http_server, streams_to_curl) {
  test_server s;
  s.routes.add("POST", "/v1/chat/completions", [&](std::shared_ptr<exchange> ex) {
    ex->out->start_events();
    for (int i = 0; i < 3; ++i) ex->out->event("{\"n\":" + std::to_string(i) + "}");
    s.server->after(10ms, [ex] {
      ex->out->event("[DONE]");
      ex->out->end_events();
    });
  });
  s.start();
  auto out = shell("curl -sS -N --max-time 20 -X POST -d '{}' " + s.url("/v1/chat/completions"));
  EXPECT_EQ(out, "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n");
}

TEST(http_server, answers_pipelined_requests_in_order) {
  test_server s;
  s.routes.add("GET", "/a/{n}", echo());
  s.start();
  raw_client c(s.port());
  c.send(
      "GET /a/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /a/2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(body_of(c.read_response()), "GET /a/1 n=1;  ");
  EXPECT_EQ(body_of(c.read_response()), "GET /a/2 n=2;  ");
}

// As above, with answers that come later (from the broker, in the gateway): while the next
// request waits in the buffer no read is outstanding, and the session must live on until its
// answer is written. (GET /v1/models twice in one packet once got no answer and an EOF.)
TEST(http_server, answers_pipelined_requests_that_are_answered_later_in_order) {
  test_server s;
  s.routes.add("GET", "/later/{n}", [&](std::shared_ptr<exchange> ex) {
    s.server->after(20ms, [ex] { ex->out->reply(text("later " + ex->params.at("n"))); });
  });
  s.routes.add("GET", "/a/{n}", echo());
  s.start();
  raw_client c(s.port());
  c.send(
      "GET /later/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /a/2 HTTP/1.1\r\nHost: "
      "127.0.0.1\r\n\r\n");
  EXPECT_EQ(body_of(c.read_response()), "later 1");
  EXPECT_EQ(body_of(c.read_response()), "GET /a/2 n=2;  ");
  // Part of the next request only, then the rest once the first is answered.
  c.send("GET /later/3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /later/4 HTTP/1.1\r\n");
  EXPECT_EQ(body_of(c.read_response()), "later 3");
  c.send("Host: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(body_of(c.read_response()), "later 4");
  c.read_to_eof(5s);
  EXPECT_TRUE(c.eof());
}

TEST(http_server, body_over_the_limit_by_content_length_is_413_before_it_is_sent) {
  gateway_options o;
  o.max_body_bytes = 1000;
  test_server s(o);
  std::atomic<int> calls{0};
  s.routes.add("POST", "/v1/completions", [&](std::shared_ptr<exchange> ex) {
    ++calls;
    ex->out->reply(text(std::to_string(ex->request.body.size())));
  });
  s.routes.add("POST", "/v1/files",
               [&](std::shared_ptr<exchange> ex) {
                 ex->out->reply(text(std::to_string(ex->request.body.size())));
               },
               {.max_body_bytes = 5000});
  s.start();

  raw_client c(s.port());
  // Only the headers: the answer must come without the 100 MB body.
  auto r = c.round_trip(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n");
  EXPECT_EQ(status_of(r), 413) << r;
  auto j = nlohmann::json::parse(body_of(r));
  EXPECT_NE(j["error"]["message"].get<std::string>().find("1000 bytes"), std::string::npos) << r;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("100000000"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos);
  c.read_to_eof(5s);
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(calls.load(), 0);

  // Exactly the limit passes; the route's own limit is larger.
  raw_client d(s.port());
  d.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n" +
         std::string(1000, 'a'));
  EXPECT_EQ(body_of(d.read_response()), "1000");
  d.send("POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000\r\n\r\n" +
         std::string(4000, 'a'));
  EXPECT_EQ(body_of(d.read_response()), "4000");
  d.send("POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5001\r\n\r\n");
  EXPECT_EQ(status_of(d.read_response()), 413);
}

TEST(http_server, bodies_of_all_connections_together_are_bounded_with_503) {
  gateway_options o;
  o.max_body_bytes = 1 << 20;
  o.max_total_body_bytes = 1536 << 10;  // room for one 1 MiB body, not two
  auto s = serving(o, "POST", "/v1/completions", [](std::shared_ptr<exchange> ex) {
    ex->out->reply(text(std::to_string(ex->request.body.size())));
  });
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                           std::to_string(1 << 20) + "\r\n\r\n";
  // The first client announces 1 MiB and sends half of it: its share is held.
  raw_client a(s->port());
  a.send(head + std::string(512 << 10, 'a'));
  // A second one is refused before its body, the first is not disturbed.
  raw_client b(s->port());
  ASSERT_TRUE(wait_until(
      [&] {
        raw_client probe(s->port());
        probe.send(head);  // held a moment when it came first; gone with the probe either way
        return status_of(probe.read_response(1s)) == 503;
      },
      20s));
  auto r = b.round_trip(head);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("too many request bodies"), std::string::npos) << r;
  // Once the first is answered, its share is free again.
  a.send(std::string(512 << 10, 'a'));
  EXPECT_EQ(body_of(a.read_response()), std::to_string(1 << 20));
  raw_client c(s->port());
  c.send(head + std::string(1 << 20, 'c'));
  EXPECT_EQ(body_of(c.read_response()), std::to_string(1 << 20));
  // A closed connection gives its share back too.
  {
    raw_client d(s->port());
    d.send(head + "partial");
    ASSERT_TRUE(wait_until(
        [&] {
          raw_client probe(s->port());
          probe.send(head);
          return status_of(probe.read_response(1s)) == 503;
        },
        20s));
  }
  ASSERT_TRUE(wait_until([&] {
    raw_client e(s->port());
    e.send(head + std::string(1 << 20, 'e'));
    return body_of(e.read_response()) == std::to_string(1 << 20);
  }));
}

std::string chunk(const std::string& data) {
  char b[16];
  std::snprintf(b, sizeof b, "%zx\r\n", data.size());
  return b + data + "\r\n";
}

TEST(http_server, chunked_bodies_are_read_and_limited) {
  auto server = serving(with_body_limit(1000), "POST", "/v1/completions", body_echo());
  auto& s = *server;
  raw_client c(s.port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
         chunk("hello ") + chunk("world") + "0\r\n\r\n");
  EXPECT_EQ(body_of(c.read_response()), "hello world");

  // Chunks that pass the limit: 413 once they do, and the connection closes.
  raw_client d(s.port());
  d.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 3; ++i) d.send(chunk(std::string(400, 'x')));
  auto r = d.read_response();
  EXPECT_EQ(status_of(r), 413) << r;
  d.read_to_eof(5s);
  EXPECT_TRUE(d.eof());
}

TEST(http_server, expect_100_continue_is_answered_before_the_body) {
  auto server = serving(with_body_limit(1000), "POST", "/v1/files", body_echo());
  auto& s = *server;
  raw_client c(s.port());
  c.send(
      "POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: "
      "5\r\n\r\n");
  EXPECT_EQ(c.read_until("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  c.send("12345");
  EXPECT_EQ(body_of(c.read_response()), "12345");
  // Too large: the final status instead of 100.
  c.send(
      "POST /v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Length: "
      "5000\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 413);
  // curl sends Expect: 100-continue for larger bodies by itself.
  std::string big(900, 'q');
  auto out = shell("printf %s " + big + " | curl -sS --max-time 20 -H 'Expect: 100-continue' " +
                   "--data-binary @- " + s.url("/v1/files"));
  EXPECT_EQ(out, big);
}

TEST(http_server, a_client_that_sends_one_byte_a_second_gets_408_and_is_closed) {
  auto s_server = serving({.header_timeout = 2000ms}, "GET", "/v1/models");
  auto& s = *s_server;
  raw_client c(s.port());
  std::string request =
      "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  auto started = clock_type::now();
  std::string got;
  for (char b : request) {
    if (!c.send(std::string(1, b))) break;
    got += c.read_some(1000ms);
    if (!got.empty() || c.eof()) break;
  }
  got += c.read_to_eof(10s);
  EXPECT_EQ(status_of(got), 408) << got;
  EXPECT_TRUE(c.eof());
  // Liveness only: well before the request could have been sent whole.
  EXPECT_LT(clock_type::now() - started, 20s);

  // A connection that sends nothing at all is closed too (nothing to answer).
  raw_client quiet(s.port());
  quiet.read_to_eof(10s);
  EXPECT_TRUE(quiet.eof());
  // The server still serves.
  raw_client d(s.port());
  d.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(d.read_response()), 200);
}

TEST(http_server, a_slow_body_gets_408_too) {
  auto s_server = serving({.header_timeout = 1000ms}, "POST", "/v1/completions");
  auto& s = *s_server;
  raw_client c(s.port());
  c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc");
  auto got = c.read_to_eof(10s);
  EXPECT_EQ(status_of(got), 408) << got;
  EXPECT_TRUE(c.eof());
}

TEST(http_server, an_idle_keep_alive_connection_is_closed) {
  auto s_server = serving({.idle_timeout = 300ms}, "GET", "/v1/models");
  auto& s = *s_server;
  raw_client c(s.port());
  c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
  c.read_to_eof(10s);
  EXPECT_TRUE(c.eof());
  wait_until([&] { return s.server->connections() == 0; });
  EXPECT_EQ(s.server->connections(), 0u);
}

// Raises this process's open-file limit to at least `n` (within the hard limit).
bool allow_open_files(rlim_t n) {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return false;
  if (l.rlim_cur >= n) return true;
  l.rlim_cur = std::min(n, l.rlim_max);
  return ::setrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur >= n;
}

TEST(http_server, serves_2000_concurrent_idle_connections) {
  constexpr int n = 2000;
  if (!allow_open_files(2 * n + 200)) GTEST_SKIP() << "cannot open " << 2 * n << " files here";
  gateway_options o;
  o.max_connections_per_address = n;  // all from 127.0.0.1
  o.headers_timeout = 60s;            // opened first, sent requests after
  o.header_timeout = 60s;
  test_server s(o);
  s.routes.add("GET", "/v1/models/{id}", echo());
  s.start();
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<raw_client>(s.port()));
    ASSERT_TRUE(clients.back()->connected()) << i;
  }
  wait_until([&] { return s.server->connections() >= n; }, 30s);
  EXPECT_EQ(s.server->connections(), static_cast<size_t>(n));
  // Every one of them, in reverse order of connecting, is answered.
  for (int i = n - 1; i >= 0; --i)
    ASSERT_TRUE(clients[i]->send("GET /v1/models/" + std::to_string(i) +
                                 " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  int answered = 0;
  for (int i = 0; i < n; ++i) {
    auto r = clients[i]->read_response();
    if (body_of(r) == "GET /v1/models/" + std::to_string(i) + " id=" + std::to_string(i) + ";  ")
      ++answered;
  }
  EXPECT_EQ(answered, n);
}

// Past max_connections, with every connection's request being answered (a stream, say), a new
// one is told 503; an idle one would have been closed to make room.
TEST(http_server, max_connections_is_enforced_with_503) {
  gateway_options o;
  o.max_connections = 5;
  std::vector<std::shared_ptr<exchange>> held;  // I/O thread only
  test_server s(o);
  s.routes.add("GET", "/v1/models", echo());
  s.routes.add("GET", "/hold", [&](std::shared_ptr<exchange> ex) { held.push_back(ex); });
  s.start();
  std::vector<std::unique_ptr<raw_client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<raw_client>(s.port()));
    clients.back()->send("GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  }
  wait_until([&] { return s.on_io([&] { return held.size(); }) == 5; });
  raw_client extra(s.port());
  auto r = extra.read_to_eof(10s);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_TRUE(extra.eof());
  EXPECT_EQ(s.server->connections(), 5u);
  // One leaves: there is room again.
  clients.pop_back();
  wait_until([&] { return s.server->connections() < 5; });
  raw_client again(s.port());
  again.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(again.read_response()), 200);
  // Idle now, it makes room for the next one.
  raw_client next(s.port());
  next.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(next.read_response()), 200);
  again.read_to_eof(10s);
  EXPECT_TRUE(again.eof());
  s.on_io([&] {
    held.clear();
    return 0;
  });
}

// Connections that never finish a request, thousands from one address (idle ones and
// slowloris ones that sent half their headers), as a flood renewed faster than any header timeout
// would hold them: other clients, and the flooding host's own new requests, are still answered.
// Before max_connections_per_address and making room, the flood took all 4,096 connections and
// 0 of 55 requests from another address were answered.
TEST(http_server, a_flood_of_unfinished_connections_locks_no_client_out) {
  constexpr int flood = 4100, legit = 55;
  if (!allow_open_files(2 * (flood + legit) + 300)) GTEST_SKIP() << "cannot open enough files";
  gateway_options o;
  // Long deadlines: what keeps clients served here is the bounds, not timeouts.
  o.header_timeout = 60s;
  o.idle_timeout = 60s;
  auto s_server = serving(o, "GET", "/v1/models");
  auto& s = *s_server;
  // Waits until the server has taken every connection the kernel queued for it.
  auto settled = [&] {
    size_t last = SIZE_MAX;
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(50ms);
      size_t now = s.server->connections();
      if (now == last) return;
      last = now;
    }
  };
  // Answered requests of `n` new connections from `source`, each sent a whole request.
  auto served = [&](const char* source, int n) {
    int answered = 0;
    for (int i = 0; i < n; ++i) {
      raw_client c(s.port(), 0, source);
      if (!c.connected()) continue;
      c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      if (status_of(c.read_response(5s)) == 200) ++answered;
    }
    return answered;
  };

  std::vector<std::unique_ptr<raw_client>> attack;
  for (int i = 0; i < flood; ++i) {
    attack.push_back(std::make_unique<raw_client>(s.port(), 0, "127.0.0.1"));
    if (i % 2) attack.back()->send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ");
  }
  settled();
  const size_t held = s.server->connections();
  const int other = served("127.0.0.2", legit);
  const int same = served("127.0.0.1", legit);
  std::printf(
      "one address's flood of %d: the server holds %zu; answered %d of %d from another "
      "address, %d of %d from the flooding one\n",
      flood, held, other, legit, same, legit);
  EXPECT_EQ(other, legit);
  EXPECT_EQ(same, legit);
  EXPECT_LE(held, size_t(o.max_connections_per_address));

  // From many addresses, past max_connections in all: the oldest unfinished ones make room.
  attack.clear();
  wait_until([&] { return s.server->connections() == 0; });
  for (int i = 0; i < flood; ++i) {
    const std::string from = "127.0.1." + std::to_string(1 + i % 10);
    attack.push_back(std::make_unique<raw_client>(s.port(), 0, from.c_str()));
  }
  settled();
  const int spread = served("127.0.0.2", legit);
  std::printf("a flood of %d from 10 addresses: the server holds %zu; answered %d of %d\n", flood,
              s.server->connections(), spread, legit);
  EXPECT_EQ(spread, legit);
  EXPECT_LE(s.server->connections(), size_t(o.max_connections));
}

// A connection's first request must have its headers within headers_timeout of the connection's
// start: waiting before the first byte does not start the clock again.
TEST(http_server, a_first_request_has_headers_timeout_from_the_connection_start) {
  gateway_options o;
  o.headers_timeout = 1000ms;
  o.header_timeout = 30s;
  test_server s(o);
  s.routes.add("GET", "/v1/models", echo());
  s.routes.add("POST", "/v1/completions", body_echo());
  s.start();
  raw_client c(s.port());
  std::this_thread::sleep_for(700ms);
  c.send("GET /v1/models HTTP/1.1\r\n");
  const auto got = c.read_to_eof(10s);  // a liveness bound, far from both limits
  EXPECT_EQ(status_of(got), 408) << got;
  EXPECT_NE(got.find("headers did not arrive within 1000 ms"), std::string::npos) << got;
  // Headers in time, and a body that takes longer than headers_timeout: header_timeout's.
  raw_client d(s.port());
  d.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\na");
  std::this_thread::sleep_for(1500ms);
  d.send("bc");
  const auto r = d.read_response();
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "abc");
}

// Where no API key is asked (loopback), a web page must not drive the gateway: Host must be an
// address, localhost or an allowed name (DNS rebinding sends the attacker's name), and a request
// from another origin is refused unless CORS allows it, a simple one (text/plain POST) too.
TEST(http_server, without_api_keys_only_its_own_names_and_origins_are_answered) {
  gateway_options o;
  o.allowed_hosts = {"hub:8080", "nas"};
  o.cors_origins = {"https://app.example"};
  std::atomic<int> ran{0};
  test_server s(o);
  s.routes.add("POST", "/v1/completions", [&](std::shared_ptr<exchange> ex) {
    ++ran;
    ex->out->reply(text("ran"));
  });
  s.routes.add("GET", "/v1/models", echo());
  s.start();
  const std::string port = std::to_string(s.port());
  auto ask = [&](const std::string& method, const std::string& headers) {
    raw_client c(s.port());
    c.send(method + " /v1/" + (method == "POST" ? "completions" : "models") + " HTTP/1.1\r\n" +
           headers + (method == "POST" ? "Content-Type: text/plain\r\nContent-Length: 2\r\n" : "") +
           "\r\n" + (method == "POST" ? "{}" : ""));
    return c.read_response();
  };
  for (const std::string& host :
       std::vector<std::string>{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port,
                                "127.0.0.1", "hub:8080", "NAS:9000", "a.localhost:" + port}) {
    EXPECT_EQ(status_of(ask("GET", "Host: " + host + "\r\n")), 200) << host;
  }
  for (const std::string& host :
       std::vector<std::string>{"evil.example:" + port, "evil.example", "hub:9090",
                                "127.0.0.1.evil.example:" + port, "[evil]:" + port}) {
    const auto r = ask("GET", "Host: " + host + "\r\n");
    EXPECT_EQ(status_of(r), 403) << host << "\n" << r;
    EXPECT_NE(r.find("\"host_not_allowed\""), std::string::npos) << r;
  }
  const std::string self = "Host: 127.0.0.1:" + port + "\r\n";
  // A page on another origin POSTs text/plain (no preflight): refused before the handler runs.
  auto r = ask("POST", self + "Origin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_NE(r.find("\"cross_origin\""), std::string::npos) << r;
  r = ask("POST", self + "Origin: null\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  r = ask("POST", self + "Origin: http://127.0.0.1:" + std::to_string(s.port() + 1) + "\r\n");
  EXPECT_EQ(status_of(r), 403) << r;  // another port is another origin
  // A no-cors GET from another site has no Origin, but Sec-Fetch-Site says so.
  r = ask("GET", self + "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_EQ(ran, 0);
  // Its own origin (the dashboard), an origin CORS allows, a link followed from another site,
  // and clients that are no browser.
  EXPECT_EQ(status_of(ask("POST", self + "Origin: http://127.0.0.1:" + port +
                                      "\r\nSec-Fetch-Site: same-origin\r\n")),
            200);
  EXPECT_EQ(status_of(ask("POST", self + "Origin: https://app.example\r\n")), 200);
  EXPECT_EQ(
      status_of(ask("GET", self + "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n")),
      200);
  EXPECT_EQ(status_of(ask("POST", self)), 200);
  EXPECT_EQ(status_of(ask("GET", "")), 200);  // HTTP/1.1 without Host: curl -H 'Host:'
  EXPECT_EQ(ran, 3);
}

// Where API keys are required (any address but loopback), a page without the key can do nothing:
// names are not checked, so a LAN gateway reached as http://hub:8080 needs no setting.
TEST(http_server, with_api_keys_required_any_name_is_answered) {
  auto s_server = serving({.listen = "0.0.0.0:0"}, "GET", "/v1/models");
  raw_client c(s_server->port());
  c.send("GET /v1/models HTTP/1.1\r\nHost: hub:8080\r\nOrigin: http://hub:8080\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
}

TEST(http_server, a_client_that_disconnects_mid_stream_gets_on_close) {
  test_server s;
  std::promise<void> closed;
  std::shared_ptr<exchange> kept;
  s.routes.add("POST", "/v1/chat/completions", [&](std::shared_ptr<exchange> ex) {
    kept = ex;
    ex->out->on_close([&] { closed.set_value(); });
    ex->out->start_events();
    ex->out->event("{\"n\":0}");
  });
  s.start();
  {
    raw_client c(s.port());
    c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_NE(c.read_until("data: {\"n\":0}\n\n").find("data: {\"n\":0}"), std::string::npos);
  }
  ASSERT_EQ(closed.get_future().wait_for(10s), std::future_status::ready);
  // The responder outlives its connection: writing to it is harmless.
  EXPECT_TRUE(s.on_io([&] {
    kept->out->event("late");
    kept->out->end_events();
    kept->out->reply(text("late"));
    return kept->out->closed();
  }));
}

TEST(http_server, a_client_that_leaves_while_waiting_for_a_reply_gets_on_close) {
  test_server s;
  std::promise<void> closed;
  std::atomic<int> close_calls{0};
  std::shared_ptr<exchange> kept;
  s.routes.add("POST", "/v1/completions", [&](std::shared_ptr<exchange> ex) {
    kept = ex;  // answered "later" (never, here)
    ex->out->on_close([&] {
      if (++close_calls == 1) closed.set_value();
    });
  });
  s.start();
  {
    raw_client c(s.port());
    c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}");
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(closed.get_future().wait_for(10s), std::future_status::ready);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(close_calls.load(), 1);
  // An on_close set after the client left still runs.
  std::promise<void> late;
  s.on_io([&] {
    kept->out->on_close([&] { late.set_value(); });
    return 0;
  });
  EXPECT_EQ(late.get_future().wait_for(10s), std::future_status::ready);
  s.on_io([&] {
    kept.reset();  // dropping an answered-never responder of a gone client is harmless
    return 0;
  });
}

long rss_kib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return -1;
}

TEST(http_server, a_reader_that_stops_reading_a_100_mib_stream_is_dropped_with_bounded_memory) {
  gateway_options o;
  o.max_unsent_bytes = 4 << 20;
  o.write_timeout = 60s;  // the unsent limit, not the write timeout, is under test here
  test_server s(o);
  std::promise<void> closed;
  std::atomic<uint64_t> offered{0};
  std::atomic<bool> dropped_seen{false};
  const std::string event(64 * 1024 - 8, 'e');
  const uint64_t total = 100ull << 20;
  std::function<void(std::shared_ptr<exchange>)> pump = [&](std::shared_ptr<exchange> ex) {
    // 1 MiB per turn of the I/O loop, as a fast producer would, until the client is gone.
    for (int i = 0; i < 16 && !ex->out->closed(); ++i) {
      ex->out->event(event);
      offered += event.size();
    }
    if (ex->out->closed()) {
      dropped_seen = true;
      return;
    }
    if (offered < total)
      s.server->after(0ms, [&, ex] { pump(ex); });
    else
      ex->out->end_events();
  };
  s.routes.add("GET", "/stream", [&](std::shared_ptr<exchange> ex) {
    ex->out->on_close([&] { closed.set_value(); });
    ex->out->start_events();
    pump(ex);
  });
  s.start();
  // Resets the peak (VmHWM) to what is resident now, so earlier tests' peaks do not count.
  std::ofstream("/proc/self/clear_refs") << "5";
  long rss_before = rss_kib("VmRSS:");
  raw_client c(s.port(), 4096);
  c.send("GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  // Never reads.
  ASSERT_EQ(closed.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(wait_until([&] { return dropped_seen.load(); }));
  EXPECT_LT(offered.load(), total);
  long peak = rss_kib("VmHWM:");
  EXPECT_LT(peak - rss_before, 64 * 1024) << "peak RSS " << peak << " KiB, before " << rss_before;
}

TEST(http_server, a_client_that_takes_no_bytes_is_dropped_after_the_write_timeout) {
  gateway_options o;
  o.write_timeout = 500ms;
  test_server s(o);
  std::promise<void> closed;
  std::shared_ptr<exchange> kept;  // on_close lives in the responder: keep it
  s.routes.add("GET", "/big", [&](std::shared_ptr<exchange> ex) {
    kept = ex;
    ex->out->on_close([&] { closed.set_value(); });
    ex->out->reply(text(std::string(64 << 20, 'b')));
  });
  s.start();
  raw_client c(s.port(), 4096);
  c.send("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  ASSERT_EQ(closed.get_future().wait_for(30s), std::future_status::ready);
  wait_until([&] { return s.server->connections() == 0; });
  EXPECT_EQ(s.server->connections(), 0u);
}

TEST(http_server, cors_preflight_and_allowed_origins) {
  auto s_server =
      serving({.cors_origins = {"https://app.example"}}, "POST", "/v1/chat/completions");
  auto& s = *s_server;
  raw_client c(s.port());
  auto r = c.round_trip(
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\n"
      "Access-Control-Request-Method: POST\r\n"
      "Access-Control-Request-Headers: authorization, content-type\r\n\r\n");
  EXPECT_EQ(status_of(r), 204) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Origin: https://app.example\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"),
            std::string::npos);
  EXPECT_NE(r.find("Access-Control-Allow-Headers: Authorization, Content-Type, X-Api-Key\r\n"),
            std::string::npos);
  r = c.round_trip(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\n"
      "Content-Length: 0\r\n\r\n");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.find("Access-Control-Allow-Origin: https://app.example\r\nVary: Origin\r\n"),
            std::string::npos)
      << r;
  // Another origin: refused (no API key is asked on loopback), without CORS headers, and so is
  // its preflight.
  r = c.round_trip(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n"
      "Content-Length: 0\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_NE(r.find("\"cross_origin\""), std::string::npos) << r;
  EXPECT_EQ(r.find("Access-Control"), std::string::npos) << r;
  r = c.round_trip(
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n"
      "Access-Control-Request-Method: POST\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_EQ(r.find("Access-Control"), std::string::npos) << r;
}

TEST(http_server, cors_wildcard_and_cors_not_configured) {
  auto any_server = serving({.cors_origins = {"*"}}, "GET", "/v1/models");
  auto& any = *any_server;
  raw_client c(any.port());
  auto r = c.round_trip(
      "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://a.example\r\n\r\n");
  EXPECT_NE(r.find("Access-Control-Allow-Origin: *\r\n"), std::string::npos) << r;

  test_server none;
  none.routes.add("GET", "/v1/models", echo());
  none.start();
  raw_client d(none.port());
  // Without keys (loopback), another origin is refused (it was answered without CORS headers).
  r = d.round_trip(
      "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://a.example\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_EQ(r.find("Access-Control"), std::string::npos) << r;
  r = d.round_trip(
      "OPTIONS /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://a.example\r\n"
      "Access-Control-Request-Method: GET\r\n\r\n");
  EXPECT_EQ(status_of(r), 403) << r;
  EXPECT_EQ(r.find("Access-Control"), std::string::npos) << r;
}

// A self-signed certificate for localhost and 127.0.0.1, made with the openssl CLI.
struct tls_files {
  std::filesystem::path dir, cert, key;
  tls_files() {
    dir = std::filesystem::temp_directory_path() /
          ("hearth-tls-" + std::to_string(::getpid()) + "-" +
           std::to_string(clock_type::now().time_since_epoch().count()));
    std::filesystem::create_directories(dir);
    cert = dir / "cert.pem";
    key = dir / "key.pem";
    shell(
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
        "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
        key.string() + " -out " + cert.string() + " 2>/dev/null");
  }
  ~tls_files() { std::filesystem::remove_all(dir); }
};

// Options serving TLS with `files`' certificate and key.
gateway_options with_tls(const tls_files& files) {
  gateway_options o;
  o.tls_cert = files.cert.string();
  o.tls_key = files.key.string();
  return o;
}

TEST(http_server, serves_tls_to_curl_with_the_same_routes_and_streams) {
  tls_files files;
  ASSERT_TRUE(std::filesystem::exists(files.cert)) << "openssl could not make a certificate";
  gateway_options o = with_tls(files);
  test_server s(o);
  s.routes.add("GET", "/health", echo(), {.is_public = true});
  s.routes.add("POST", "/v1/chat/completions", [&](std::shared_ptr<exchange> ex) {
    ex->out->start_events();
    ex->out->event("{\"n\":0}");
    s.server->after(10ms, [ex] {
      ex->out->event("[DONE]");
      ex->out->end_events();
    });
  });
  s.start();
  std::string base = "https://localhost:" + std::to_string(s.port());
  auto out = shell("curl -sS --max-time 20 --cacert " + files.cert.string() + " " + base +
                   "/health " + base + "/health");
  EXPECT_EQ(out, "GET /health   GET /health   ");
  out = shell("curl -sS -N --max-time 20 --cacert " + files.cert.string() + " -d '{}' " + base +
              "/v1/chat/completions");
  EXPECT_EQ(out, "data: {\"n\":0}\n\ndata: [DONE]\n\n");
  // Without trusting the certificate, curl refuses (the server really speaks TLS).
  EXPECT_EQ(shell("curl -s --max-time 20 -o /dev/null -w '%{http_code}' " + base + "/health"),
            "000");
  // Plain HTTP to the TLS port fails the handshake; the server goes on.
  raw_client c(s.port());
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  c.read_to_eof(10s);
  EXPECT_TRUE(c.eof());
  out = shell("curl -sS --max-time 20 --cacert " + files.cert.string() + " " + base + "/health");
  EXPECT_EQ(out, "GET /health   ");
}

TEST(http_server, a_tls_client_that_never_handshakes_is_closed) {
  tls_files files;
  ASSERT_TRUE(std::filesystem::exists(files.cert)) << "openssl could not make a certificate";
  gateway_options o = with_tls(files);
  o.header_timeout = 500ms;
  auto server = serving(o, "GET", "/health");
  raw_client c(server->port());
  c.read_to_eof(10s);
  EXPECT_TRUE(c.eof());
  EXPECT_TRUE(wait_until([&] { return server->server->connections() == 0; }));
}

TEST(http_server, bad_tls_files_and_listen_addresses_are_named) {
  router r;
  gateway_options o;
  o.listen = "127.0.0.1:0";
  o.tls_cert = "/nonexistent/cert.pem";
  o.tls_key = "/nonexistent/key.pem";
  try {
    http_server s(o, r, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cert.pem"), std::string::npos) << e.what();
  }
  o.tls_key.clear();
  EXPECT_THROW(http_server(o, r, {}), std::runtime_error);
  o.tls_cert.clear();
  for (const char* bad : {"", "8080", "nohost", "example.com:80", "1.2.3.4:99999", "::1:80",
                          "[::1]80", "[::1", "127.0.0.1:", "127.0.0.1:8a", ":8080"}) {
    o.listen = bad;
    try {
      http_server s(o, r, {});
      ADD_FAILURE() << "\"" << bad << "\" accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(http_server, listens_on_localhost_and_ipv6) {
  for (const char* listen : {"localhost:0", "[::1]:0"}) {
    gateway_options o;
    o.listen = listen;
    test_server s(o);
    s.routes.add("GET", "/health", echo(), {.is_public = true});
    try {
      s.start();
    } catch (const std::runtime_error& e) {
      // A machine without IPv6 on loopback.
      if (std::string(listen).front() == '[') GTEST_SKIP() << e.what();
      throw;
    }
    std::string host = std::string(listen).front() == '[' ? "[::1]" : "localhost";
    auto out =
        shell("curl -sS --max-time 20 http://" + host + ":" + std::to_string(s.port()) + "/health");
    EXPECT_EQ(out, "GET /health   ") << listen;
  }
}

TEST(http_server, malformed_requests_get_400_or_431_and_the_server_goes_on) {
  test_server s;
  s.routes.add("GET", "/v1/models", echo());
  s.start();
  struct attempt {
    std::string bytes;
    int status;
  };
  std::vector<attempt> attempts = {
      {"\x16\x03\x01\x02\x00garbage\r\n\r\n", 400},
      {"G@T /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
      {"GET /v1/models HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 400},
      {"GET /v1/models HTTP/1.1\r\nBad Header\r\n\r\n", 400},
      {"GET /v1/models HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400},
      {"GET /v1/models HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"GET http://evil.example/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400},
      {"GET /v1/models HTTP/1.1\r\nX-Huge: " + std::string(20000, 'h') + "\r\n\r\n", 431},
      {std::string("GET /v1/models\0 HTTP/1.1\r\n\r\n", 29), 400},
      // Request smuggling: two ways of saying where the body ends.
      {"POST /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       400},
      {"POST /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\nxx", 400},

  };
  for (const auto& a : attempts) {
    raw_client c(s.port());
    c.send(a.bytes);
    auto r = c.read_to_eof(10s);
    EXPECT_EQ(status_of(r), a.status) << a.bytes.substr(0, 60) << " -> " << r;
    EXPECT_TRUE(c.eof()) << a.bytes.substr(0, 60);
    EXPECT_TRUE(nlohmann::json::accept(body_of(r))) << r;
  }
  raw_client c(s.port());
  c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
}

TEST(http_server, authenticates_non_public_routes_before_their_handlers) {
  test_server s;
  std::atomic<int> auth_calls{0};
  s.routes.add("GET", "/health", echo(), {.is_public = true});
  s.routes.add("GET", "/v1/whoami", [](std::shared_ptr<exchange> ex) {
    ex->out->reply(text(ex->who.owner + "/" + ex->who.name));
  });
  s.start([&](const http_request& q, std::function<void(const caller*, http_response)> done) {
    ++auth_calls;
    // Answered later, from a timer, as a broker round trip would be.
    s.server->after(5ms, [q, done] {
      if (q.header("authorization") != "Bearer good")
        return done(nullptr, error_response(401, "bad key", "authentication_error"));
      caller who{"good", "alice", "laptop", false};
      done(&who, {});
    });
  });
  EXPECT_EQ(shell("curl -sS --max-time 20 " + s.url("/health")), "GET /health   ");
  EXPECT_EQ(auth_calls.load(), 0);
  EXPECT_EQ(shell("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' " + s.url("/v1/whoami")),
            "401");
  EXPECT_EQ(shell("curl -sS --max-time 20 -H 'Authorization: Bearer good' " + s.url("/v1/whoami")),
            "alice/laptop");
  EXPECT_EQ(auth_calls.load(), 2);
}

TEST(http_server, a_handler_that_throws_or_drops_its_request_gets_a_500) {
  test_server s;
  s.routes.add("GET", "/throws",
               [](std::shared_ptr<exchange>) { throw std::runtime_error("boom"); });
  s.routes.add("GET", "/drops", [](std::shared_ptr<exchange>) {});
  s.routes.add("GET", "/drops-stream", [](std::shared_ptr<exchange> ex) {
    ex->out->start_events();
    ex->out->event("one");
  });
  s.routes.add("GET", "/ok", echo());
  s.start();
  raw_client c(s.port());
  auto r = c.round_trip("GET /throws HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(r), 500) << r;
  EXPECT_NE(r.find("boom"), std::string::npos);
  c.send("GET /drops HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 500);
  c.send("GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()),
            200);  // A stream let go of unfinished is cut off: no final chunk.
  raw_client d(s.port());
  d.send("GET /drops-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  auto got = d.read_to_eof(10s);
  EXPECT_TRUE(d.eof());
  EXPECT_NE(got.find("data: one\n\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("0\r\n\r\n"), std::string::npos) << got;
}

TEST(http_server, post_and_after_run_on_the_io_thread_from_any_thread) {
  test_server s;
  s.start();
  auto io_thread = s.on_io([] { return std::this_thread::get_id(); });
  EXPECT_NE(io_thread, std::this_thread::get_id());
  std::promise<std::thread::id> later;
  auto asked = clock_type::now();
  std::thread other(
      [&] { s.server->after(50ms, [&] { later.set_value(std::this_thread::get_id()); }); });
  other.join();
  auto f = later.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), io_thread);
  EXPECT_GE(clock_type::now() - asked, 50ms);
}

TEST(http_server, stopping_ends_streams_with_on_close) {
  auto s = std::make_unique<test_server>();
  std::atomic<int> closes{0};
  std::shared_ptr<exchange> kept;
  s->routes.add("GET", "/stream", [&](std::shared_ptr<exchange> ex) {
    kept = ex;
    ex->out->on_close([&] { ++closes; });
    ex->out->start_events();
    ex->out->event("a");
  });
  s->start();
  raw_client c(s->port());
  c.send("GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  c.read_until("data: a\n\n");
  s->stop = true;
  s->thread.join();
  EXPECT_EQ(closes.load(), 1);
  EXPECT_TRUE(kept->out->closed());
  c.read_to_eof(10s);
  EXPECT_TRUE(c.eof());
  kept.reset();
}

TEST(http_server, stopping_closes_open_connections) {
  auto s = std::make_unique<test_server>();
  s->routes.add("GET", "/v1/models", echo());
  s->start();
  raw_client c(s->port());
  c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
  s.reset();
  c.read_to_eof(10s);
  EXPECT_TRUE(c.eof());
}

}  // namespace
}  // namespace hearth::gateway
