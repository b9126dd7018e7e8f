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
  explicit raw_client(uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
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

TEST(http_server, routes_requests_and_keeps_the_connection_alive) {
  test_server s;
  s.routes.add("GET", "/v1/models", echo());
  s.routes.add("GET", "/v1/models/{id}", echo());
  s.routes.add("POST", "/v1/chat/completions", echo());
  s.start();

  raw_client c(s.port());
  ASSERT_TRUE(c.connected());
  c.send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(body_of(r), "GET /v1/models   ");
  // The same connection, a parameter, a percent-encoded path and a query.
  c.send("GET /v1/models/llama%2F3%20b?x=a+b%21 HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.read_response();
  EXPECT_EQ(body_of(r), "GET /v1/models/llama/3 b id=llama/3 b; a b! ");
  c.send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}");
  r = c.read_response();
  EXPECT_EQ(body_of(r), "POST /v1/chat/completions   {\"a\":1}");
  EXPECT_FALSE(c.eof());
  EXPECT_EQ(s.server->connections(), 1u);
}

TEST(http_server, answers_404_and_405_in_openai_shape) {
  test_server s;
  s.routes.add("POST", "/v1/chat/completions", echo());
  s.start();
  raw_client c(s.port());
  c.send("GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.read_response();
  EXPECT_EQ(status_of(r), 404) << r;
  auto j = nlohmann::json::parse(body_of(r));
  EXPECT_EQ(j["error"]["type"], "not_found_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("/v1/nothing"), std::string::npos);
  c.send("GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.read_response();
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
  c.send("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
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
  c.send("GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(c.read_response()), 200);
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

}  // namespace
}  // namespace hearth::gateway
