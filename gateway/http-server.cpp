// The one file that knows Boost.Beast. A connection is a session: a small state machine over one
// stream (plain TCP or TLS: the same code, the stream is a template parameter of the few
// functions that do I/O). At most one read and one write are outstanding on a stream at a time,
// which is what Asio's SSL stream allows, so a session can watch for its client going away
// while it streams an answer.
//
// A session's life:      [handshake] -> idle -> header -> body -> answering -> idle ...
//                          any state -> closed (error, timeout, peer gone, server stops)
//  answering with an early error (400, 408, 413, 431) -> draining -> closed
// What keeps a session alive is its outstanding I/O (each completion handler holds it), and
// while it answers with none outstanding (a pipelined request waits in its buffer), hold_.
#include "gateway/http-server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "gateway/url.h"

namespace hearth::gateway {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// After an error answer that leaves the request unread, the rest the client sends is read and
// dropped for this long (or this many bytes), so that closing does not reset the connection
// before the client has read the answer.
constexpr std::chrono::milliseconds linger_time{1000};
constexpr size_t linger_bytes = 1 << 20;
// One write hands the kernel at most this many queued pieces.
constexpr size_t write_batch = 64;
constexpr size_t read_chunk = 4096;
// Request line and headers together (Beast's default; 431 beyond).
constexpr uint32_t header_limit = 8192;

// Where to listen, from "HOST:PORT": "127.0.0.1:8080", "[::1]:0", "localhost:8080",
// "0.0.0.0:80". Throws naming the text when it is not that.
tcp::endpoint parse_listen(const std::string& listen) {
  auto fail = [&](const std::string& why) {
    return std::runtime_error("listen address \"" + listen + "\": " + why +
                              " (expected HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)");
  };
  std::string host, port;
  if (!listen.empty() && listen.front() == '[') {
    size_t close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':')
      throw fail("an IPv6 address in brackets must be followed by :PORT");
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    size_t colon = listen.rfind(':');
    if (colon == std::string::npos) throw fail("no port");
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string::npos) throw fail("an IPv6 address needs brackets");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw fail("port \"" + port + "\" is not a number");
  unsigned long n = std::stoul(port);
  if (n > 65535) throw fail("port " + port + " is larger than 65535");
  if (host.empty()) throw fail("no host");
  if (host == "localhost") host = "127.0.0.1";
  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) throw fail("\"" + host + "\" is not an IP address or localhost");
  return {address, static_cast<uint16_t>(n)};
}

std::unique_ptr<asio::ssl::context> load_tls(const gateway_options& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) return nullptr;
  if (o.tls_cert.empty() || o.tls_key.empty())
    throw std::runtime_error("TLS needs both a certificate and a key file (tls_cert \"" +
                             o.tls_cert + "\", tls_key \"" + o.tls_key + "\")");
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  error_code ec;
  ctx->use_certificate_chain_file(o.tls_cert, ec);
  if (ec)
    throw std::runtime_error("TLS certificate file \"" + o.tls_cert +
                             "\": cannot load a PEM certificate chain: " + ec.message());
  ctx->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec);
  if (ec)
    throw std::runtime_error("TLS key file \"" + o.tls_key +
                             "\": cannot load a PEM private key: " + ec.message());
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw std::runtime_error("TLS key file \"" + o.tls_key +
                             "\" does not belong to the certificate in \"" + o.tls_cert + "\"");
  return ctx;
}

std::string_view view(beast::string_view s) {
  return {s.data(), s.size()};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string status_line(int status) {
  auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

std::string hex(size_t n) {
  char text[20];
  int len = std::snprintf(text, sizeof text, "%zx", n);
  return std::string(text, static_cast<size_t>(len));
}

// Warnings about clients (malformed requests, timeouts, drops) are what an attacker can make
// the most of: at most `burst` of them per window, then one line saying how many were left out.
class warn_limiter {
 public:
  template <class... Args>
  void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
    auto now = std::chrono::steady_clock::now();
    if (now - window_start_ > window) {
      if (suppressed_ > 0)
        spdlog::warn("http: {} more warnings about clients left out in the last {} s", suppressed_,
                     window.count());
      window_start_ = now;
      count_ = 0;
      suppressed_ = 0;
    }
    if (++count_ > burst) {
      ++suppressed_;
      return;
    }
    spdlog::warn(fmt, std::forward<Args>(args)...);
  }

 private:
  static constexpr std::chrono::seconds window{10};
  static constexpr int burst = 20;
  std::chrono::steady_clock::time_point window_start_{};
  int count_ = 0;
  int suppressed_ = 0;
};

struct server_state;

// What the responder of one request sees of its session (non-template: the stream type stays
// inside the session).
class session_base;

class server_responder final : public responder {
 public:
  server_responder(std::weak_ptr<session_base> s, uint64_t seq, asio::any_io_executor ex)
      : session_(std::move(s)), seq_(seq), executor_(std::move(ex)) {}
  ~server_responder() override;

  void reply(http_response r) override;
  void start_events() override;
  void event(std::string_view data) override;
  void named_event(std::string_view name, std::string_view data) override;
  void comment(std::string_view text) override;
  void end_events() override;
  bool closed() const override;
  void on_close(std::function<void()> f) override;

  // The session says its client went away before the answer ended.
  void client_gone() {
    if (gone_) return;
    gone_ = true;
    if (on_close_) asio::post(executor_, std::move(on_close_));
    on_close_ = nullptr;
  }

 private:
  std::shared_ptr<session_base> live() const;
  std::weak_ptr<session_base> session_;
  uint64_t seq_;
  asio::any_io_executor executor_;
  std::function<void()> on_close_;
  bool answered_ = false;  // reply() or start_events() was called
  bool gone_ = false;
};

// The parts of the server that sessions share; lives in http_server::impl.
struct server_state {
  const gateway_options& options;
  const router& routes;
  const authenticate_fn& authenticate;
  asio::ssl::context* tls = nullptr;
  std::atomic<size_t> connections{0};
  uint64_t body_bytes = 0;  // reserved by requests being read or answered (I/O thread only)
  std::map<int, uint64_t> responses;  // answers by status code, streams as 200 (I/O thread only)
  std::map<uint64_t, std::weak_ptr<session_base>> sessions;  // I/O thread only
  // The sessions of each client address, oldest first (I/O thread only).
  std::unordered_map<std::string, std::set<uint64_t>> by_address;
  uint64_t next_session_id = 0;
  warn_limiter warns;
  // Where no API key is asked for, Host and Origin are checked (host_allowed, origin_allowed).
  bool check_origins = false;

  server_state(const gateway_options& o, const router& r, const authenticate_fn& a)
      : options(o), routes(r), authenticate(a), check_origins(!keys_required(o)) {}

  void forget(uint64_t id, const std::string& address) {
    sessions.erase(id);
    auto it = by_address.find(address);
    if (it == by_address.end()) return;
    it->second.erase(id);
    if (it->second.empty()) by_address.erase(it);
  }
};

class session_base : public std::enable_shared_from_this<session_base> {
 public:
  session_base(server_state& server, asio::any_io_executor ex, std::string remote,
               std::string address, uint64_t id)
      : server_(server),
        executor_(ex),
        read_timer_(ex),
        write_timer_(ex),
        remote_(std::move(remote)),
        address_(std::move(address)),
        id_(id) {}
  virtual ~session_base() = default;

  void start() {
    // The first request's headers are due headers_timeout after the connection's start.
    request_start_ = std::chrono::steady_clock::now();
    if (server_.tls) {
      phase_ = phase::handshake;
      arm_read_timer(headers_limit());
      do_handshake();
    } else {
      wait_for_request(headers_limit());
    }
  }

  // Whether it could be closed to make room for another connection: it has not sent a whole
  // request (it is in its TLS handshake, idle, or sending headers), so nothing of it is lost.
  bool waiting_for_request() const {
    return phase_ == phase::handshake || phase_ == phase::idle || phase_ == phase::header;
  }
  const std::string& remote() const { return remote_; }

  // Closes the socket; the client's request, if one is being answered, gets on_close.
  void close(std::string_view why) {
    if (phase_ == phase::closed) return;
    const auto hold = std::move(hold_);  // the session lives to the end of this call
    spdlog::debug("http {}: connection closed ({})", remote_, why);
    phase_ = phase::closed;
    release_body();
    read_timer_.cancel();
    write_timer_.cancel();
    close_socket();
    server_.connections.fetch_sub(1);
    server_.forget(id_, address_);
    // A write still outstanding points into out_: its bytes go with the session.
    if (!writing_) out_.clear();
    if (answering_)
      if (auto r = responder_.lock()) r->client_gone();
    answering_ = false;
  }

  void release_body() {
    server_.body_bytes -= body_reserved_;
    body_reserved_ = 0;
  }

  // ---- called by the responder of request `seq` -------------------------------------------
  bool serving(uint64_t seq) const { return phase_ != phase::closed && answering_ && seq == seq_; }
  bool open_for(uint64_t seq) const { return serving(seq) && !final_queued_; }

  void reply(uint64_t seq, http_response r) {
    if (!open_for(seq) || streaming_) return;
    std::string head = status_line(r.status);
    if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
    head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    for (const auto& [name, value] : r.headers) head += name + ": " + value + "\r\n";
    head += common_headers();
    head += "\r\n";
    spdlog::debug("http {}: {} {} -> {}", remote_, method_, target_, r.status);
    ++server_.responses[r.status];
    final_queued_ = true;
    queue(std::move(head));
    if (!r.body.empty()) queue(std::move(r.body));
  }

  void start_events(uint64_t seq) {
    if (!open_for(seq) || streaming_) return;
    streaming_ = true;
    // HTTP/1.0 knows no chunks: the stream ends when the connection does.
    chunked_ = version_ >= 11;
    std::string head = status_line(200);
    head +=
        "Content-Type: text/event-stream\r\n"
        "Cache-Control: no-cache\r\n";
    if (chunked_)
      head += "Transfer-Encoding: chunked\r\n";
    else
      keep_alive_ = false;
    head += common_headers();
    head += "\r\n";
    spdlog::debug("http {}: {} {} -> 200 (events)", remote_, method_, target_);
    ++server_.responses[200];
    queue(std::move(head));
  }

  // `text` is one whole SSE message ("data: ...\n\n"); framed as one chunk.
  void send_event(uint64_t seq, std::string text) {
    if (!open_for(seq) || !streaming_) return;
    size_t framed = text.size() + (chunked_ ? hex(text.size()).size() + 4 : 0);
    if (unsent_ + framed > server_.options.max_unsent_bytes) {
      server_.warns.warn("http {}: dropped: the client fell behind by {} unsent bytes (limit {})",
                         remote_, unsent_ + framed, server_.options.max_unsent_bytes);
      close("stream reader fell behind");
      return;
    }
    if (chunked_) {
      std::string chunk = hex(text.size()) + "\r\n";
      chunk += text;
      chunk += "\r\n";
      queue(std::move(chunk));
    } else {
      queue(std::move(text));
    }
  }

  // Ends a stream without its last chunk, once what is queued is written: the client sees a
  // broken stream, not a complete one.
  void cut_stream(uint64_t seq) {
    if (!open_for(seq) || !streaming_) return;
    spdlog::debug("http {}: {} {}: the handler let go of an unfinished stream", remote_, method_,
                  target_);
    keep_alive_ = false;
    final_queued_ = true;
    maybe_answer_done();
  }

  void end_events(uint64_t seq) {
    if (!open_for(seq) || !streaming_) return;
    final_queued_ = true;
    if (chunked_)
      queue("0\r\n\r\n");
    else
      maybe_answer_done();
  }

 protected:
  enum class phase { handshake, idle, header, body, answering, draining, closed };

  // ---- the stream's I/O, in the template below ----------------------------------------------
  virtual void do_handshake() = 0;
  virtual void do_read_some() = 0;    // into buffer_, then on_read_some
  virtual void do_read_header() = 0;  // with parser_, then on_request_read
  virtual void do_read_body() = 0;    // with parser_, then on_request_read
  virtual void do_write_some(std::vector<asio::const_buffer> buffers) = 0;  // then on_write
  virtual void close_socket() = 0;
  virtual void shutdown_send() = 0;

  void on_handshake(error_code ec) {
    if (phase_ != phase::handshake) return;
    if (ec) {
      server_.warns.warn("http {}: TLS handshake failed: {}", remote_, ec.message());
      close("TLS handshake failed");
      return;
    }
    wait_for_request(std::chrono::duration_cast<std::chrono::milliseconds>(
        request_start_ + headers_limit() - std::chrono::steady_clock::now()));
  }

  void on_read_some(error_code ec) {
    reading_ = false;
    if (phase_ == phase::closed) return;
    if (ec) {
      close(ec == asio::error::eof ? "client closed" : "read failed: " + ec.message());
      return;
    }
    switch (phase_) {
      case phase::idle:
        begin_request();
        break;
      case phase::answering:
        // Bytes of a next request (pipelining): they wait in the buffer, and the session stops
        // watching (a read would hold up that request). A gone client is then noticed when a
        // write fails.
        break;
      case phase::draining:
        drained_ += buffer_.size();
        buffer_.consume(buffer_.size());
        if (drained_ < linger_bytes)
          read_some();
        else
          close("lingered long enough");
        break;
      default:
        break;
    }
  }

  // The request's headers (phase header) or its body (phase body) are read.
  void on_request_read(error_code ec) {
    reading_ = false;
    if (phase_ == phase::draining) return on_read_some(ec);
    if (phase_ != phase::header && phase_ != phase::body) return;
    if (ec) return request_failed(ec);
    if (phase_ == phase::header)
      handle_header();
    else
      dispatch();
  }

  void on_write(error_code ec, size_t n) {
    writing_ = false;
    write_timer_.cancel();
    if (phase_ == phase::closed) return;
    if (ec) {
      close("write failed: " + ec.message());
      return;
    }
    unsent_ -= n;
    while (n > 0) {
      size_t left = out_.front().size() - out_offset_;
      if (n < left) {
        out_offset_ += n;
        break;
      }
      n -= left;
      out_.pop_front();
      out_offset_ = 0;
    }
    if (!out_.empty())
      write_next();
    else
      maybe_answer_done();
  }

  server_state& server_;
  asio::any_io_executor executor_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;

 private:
  void read_some() {
    reading_ = true;
    do_read_some();
  }

  void arm_read_timer(std::chrono::milliseconds d) {
    uint64_t gen = ++read_timer_gen_;
    read_timer_.expires_after(d);
    read_timer_.async_wait([self = shared_from_this(), this, gen](error_code ec) {
      if (ec || gen != read_timer_gen_ || phase_ == phase::closed) return;
      read_deadline_passed();
    });
  }
  void cancel_read_timer() {
    ++read_timer_gen_;
    read_timer_.cancel();
  }

  // The time a request's headers get (headers_timeout, within header_timeout).
  std::chrono::milliseconds headers_limit() const {
    return std::min(server_.options.headers_timeout, server_.options.header_timeout);
  }

  void read_deadline_passed() {
    switch (phase_) {
      case phase::header:
      case phase::body: {
        const bool headers = phase_ == phase::header;
        const auto ms = (headers ? headers_limit() : server_.options.header_timeout).count();
        server_.warns.warn("http {}: request {} not received within {} ms", remote_,
                           headers ? "headers" : "body", ms);
        answer_error(error_response(
            408,
            std::string(headers ? "the request's headers" : "the request's headers and body") +
                " did not arrive within " + std::to_string(ms) + " ms",
            "invalid_request_error", {}, "request_timeout"));
        break;
      }
      case phase::idle:
        close("idle");
        break;
      case phase::handshake:
        server_.warns.warn("http {}: TLS handshake not done within {} ms", remote_,
                           headers_limit().count());
        close("TLS handshake timed out");
        break;
      case phase::draining:
        close("lingered long enough");
        break;
      default:
        break;
    }
  }

  // Waits for the first byte of the next request for at most `timeout`. (A read outstanding
  // here found the buffer empty: watch_for_close.)
  void wait_for_request(std::chrono::milliseconds timeout) {
    phase_ = phase::idle;
    release_body();
    if (buffer_.size() > 0 && !reading_) return begin_request();
    arm_read_timer(timeout);
    if (!reading_) read_some();
  }

  void begin_request() {
    phase_ = phase::header;
    parser_.emplace();
    parser_->header_limit(header_limit);
    // Bodies are limited per route once the headers say which (handle_header); the parser
    // would otherwise judge Content-Length by its own default while reading the headers.
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    // A later request's time starts at its first byte (idle_timeout bounded the wait for it);
    // the first one's at the connection's start, so that waiting first gains a client nothing.
    const auto now = std::chrono::steady_clock::now();
    if (seq_ > 0) request_start_ = now;
    arm_read_timer(std::chrono::duration_cast<std::chrono::milliseconds>(request_start_ +
                                                                         headers_limit() - now));
    reading_ = true;
    do_read_header();
  }

  void request_failed(error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      close("client closed mid-request");
    } else if (ec == bhttp::error::header_limit) {
      server_.warns.warn("http {}: request headers too large", remote_);
      answer_error(error_response(
          431, "the request's headers are larger than " + std::to_string(header_limit) + " bytes",
          "invalid_request_error", {}, "headers_too_large"));
    } else if (ec == bhttp::error::body_limit) {
      server_.warns.warn("http {}: request body over {} bytes", remote_, body_limit_);
      answer_error(too_large(body_limit_, 0));
    } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category()) {
      server_.warns.warn("http {}: malformed request: {}", remote_, ec.message());
      answer_error(error_response(400, "malformed HTTP request: " + ec.message(),
                                  "invalid_request_error", {}, "bad_request"));
    } else {
      close("read failed: " + ec.message());
    }
  }

  static http_response too_large(uint64_t limit, uint64_t length) {
    std::string msg = "the request body is larger than this endpoint takes (" +
                      std::to_string(limit) + " bytes" +
                      (length ? ", Content-Length says " + std::to_string(length) : "") + ")";
    return error_response(413, msg, "invalid_request_error", {}, "request_too_large");
  }

  // Answers before (or instead of) reading the request's body; the connection closes after.
  void answer_error(http_response r) {
    cancel_read_timer();
    keep_alive_ = false;
    begin_answer();
    phase_ = phase::draining;  // what the client still sends is read and dropped
    reply(seq_, std::move(r));
  }

  // Answers a request whose body was not read: the connection can only be kept when it had none.
  void answer_early(http_response r) {
    if (!parser_->is_done()) return answer_error(std::move(r));
    cancel_read_timer();
    begin_answer();
    phase_ = phase::answering;
    watch_for_close();
    reply(seq_, std::move(r));
  }

  // Keeps reading while a request is answered: an EOF then means the client went away (and its
  // job can be cancelled). Not when bytes of a next request are already here: a read
  // outstanding would hold that request up until more bytes came.
  void watch_for_close() {
    if (!reading_ && buffer_.size() == 0) read_some();
  }

  void begin_answer() {
    ++seq_;
    answering_ = true;
    final_queued_ = false;
    streaming_ = false;
    chunked_ = false;
    responder_.reset();
  }

  std::string common_headers() const {
    std::string h;
    if (!allow_origin_.empty()) {
      h += "Access-Control-Allow-Origin: " + allow_origin_ + "\r\n";
      if (allow_origin_ != "*") h += "Vary: Origin\r\n";
    }
    if (!keep_alive_)
      h += "Connection: close\r\n";
    else if (version_ < 11 || streaming_)
      h += "Connection: keep-alive\r\n";
    return h;
  }

  // A browser's request from a page of another origin, unless CORS allows that origin. The page's
  // origin is in Origin (every request but a GET or HEAD of the page's own origin, and every
  // cross-origin fetch); without it, Sec-Fetch-Site tells a cross-site request (a no-cors GET)
  // from a navigation, which may open the dashboard from a link.
  bool origin_allowed(const std::string& origin, const std::string& host,
                      std::string_view fetch_site, std::string_view fetch_mode) const {
    if (!origin.empty()) {
      if (!cors_origin(origin).empty()) return true;
      // Same origin: the origin's host and port are the Host the request was sent to.
      const auto scheme_end = origin.find("://");
      return scheme_end != std::string::npos && origin != "null" &&
             lower(origin.substr(scheme_end + 3)) == lower(host);
    }
    if (fetch_site != "cross-site" && fetch_site != "same-site") return true;
    return fetch_mode == "navigate" && (method_ == "GET" || method_ == "HEAD");
  }

  // Whether Host names this gateway where it asks for no API key: an IP address (no web page
  // but one served from that address has it as its origin), localhost and *.localhost, an
  // allowed_hosts entry, or none at all (an HTTP/1.0 client; browsers always send it). A DNS
  // rebinding attack sends its own name.
  static bool host_allowed(const std::string& host, const std::vector<std::string>& allowed) {
    if (host.empty()) return true;
    std::string name = lower(host);
    for (const auto& a : allowed)
      if (a == "*" || lower(a) == name) return true;
    error_code ec;
    if (name.front() == '[') {  // [IPv6]:PORT
      const auto close = name.find(']');
      if (close == std::string::npos) return false;
      asio::ip::make_address_v6(name.substr(1, close - 1), ec);
      return !ec;
    }
    if (auto colon = name.rfind(':'); colon != std::string::npos) name.erase(colon);
    for (const auto& a : allowed)
      if (lower(a) == name) return true;
    if (name == "localhost" || name.ends_with(".localhost")) return true;
    const auto address = asio::ip::make_address_v4(name, ec);
    return !ec && address.to_string() == name;
  }

  // The value of Access-Control-Allow-Origin for this request's Origin ("" = none).
  std::string cors_origin(const std::string& origin) const {
    const auto& allowed = server_.options.cors_origins;
    if (allowed.empty() || origin.empty()) return {};
    for (const auto& a : allowed) {
      if (a == "*") return "*";
      if (a == origin) return origin;
    }
    return {};
  }

  void handle_header() {
    auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    method_ = std::string(req.method_string());
    target_ = std::string(req.target());
    allow_origin_ = cors_origin(std::string(req[bhttp::field::origin]));
    if (target_.empty() || target_.front() != '/')
      return answer_error(error_response(400,
                                         "the request target must be a path starting with '/', "
                                         "got \"" +
                                             target_.substr(0, 100) + "\"",
                                         "invalid_request_error", {}, "bad_request"));
    size_t q = target_.find('?');
    // Routed on the raw path, so that an escaped '/' ("org%2Fmodel") stays inside its segment;
    // the parameters are decoded after.
    std::string raw_path = target_.substr(0, q);
    path_ = percent_decode(raw_path, false);
    query_ = q == std::string::npos ? std::string() : target_.substr(q + 1);

    if (server_.check_origins) {
      const std::string host(view(req[bhttp::field::host]));
      if (!host_allowed(host, server_.options.allowed_hosts)) {
        server_.warns.warn("http {}: {} {}: refused Host '{}'", remote_, method_, path_,
                           host.substr(0, 100));
        return answer_early(error_response(
            403,
            "this gateway does not answer to the name '" + host.substr(0, 100) +
                "' (Host): without API keys it answers to IP addresses and localhost; give "
                "--allow-host NAME (allowed_hosts:) for a name of this machine",
            "permission_error", {}, "host_not_allowed"));
      }
      const std::string origin(view(req[bhttp::field::origin]));
      if (!origin_allowed(origin, host, view(req["sec-fetch-site"]), view(req["sec-fetch-mode"]))) {
        const std::string from = origin.empty() ? "another site" : origin.substr(0, 100);
        server_.warns.warn("http {}: {} {}: refused a request from {}", remote_, method_, path_,
                           from);
        return answer_early(error_response(
            403,
            "a web page from " + from +
                " may not use this gateway, which asks it for no API key; allow its origin "
                "with --cors ORIGIN (cors:)",
            "permission_error", {}, "cross_origin"));
      }
    }

    // A Transfer-Encoding that does not end in chunked leaves the body's end unknown (RFC 9112
    // 6.3: answered 400 and closed). Beast already refuses one beside a Content-Length.
    if (req.find(bhttp::field::transfer_encoding) != req.end() && !parser_->chunked())
      return answer_error(error_response(
          400,
          "Transfer-Encoding \"" + std::string(view(req[bhttp::field::transfer_encoding])) +
              "\" does not end in chunked: the body's length is unknown",
          "invalid_request_error", {}, "bad_request"));

    if (method_ == "OPTIONS" && !server_.options.cors_origins.empty() &&
        req.find(bhttp::field::access_control_request_method) != req.end())
      return answer_preflight();

    match_ = server_.routes.find(method_, raw_path);
    for (auto& [name, value] : match_.params) value = percent_decode(value, false);
    if (!match_.h) {
      if (match_.path_known)
        return answer_early(error_response(405, "method " + method_ + " is not allowed on " + path_,
                                           "invalid_request_error", {}, "method_not_allowed"));
      return answer_early(error_response(404, "no such endpoint: " + method_ + " " + path_,
                                         "not_found_error", {}, "not_found"));
    }
    body_limit_ = match_.options.max_body_bytes ? match_.options.max_body_bytes
                                                : server_.options.max_body_bytes;
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      server_.warns.warn("http {}: {} {}: Content-Length {} over the limit {}", remote_, method_,
                         path_, *length, body_limit_);
      return answer_error(too_large(body_limit_, *length));
    }
    // The body's share of max_total_body_bytes, held until its request has been answered.
    const auto length = parser_->content_length();
    const uint64_t want = length ? *length : parser_->chunked() ? body_limit_ : 0;
    if (want > server_.options.max_total_body_bytes - server_.body_bytes) {
      server_.warns.warn("http {}: {} {}: {} body bytes would pass max_total_body_bytes {}",
                         remote_, method_, path_, want, server_.options.max_total_body_bytes);
      return answer_error(error_response(
          503,
          "the gateway is receiving too many request bodies at once (" +
              std::to_string(server_.body_bytes) + " of " +
              std::to_string(server_.options.max_total_body_bytes) + " bytes); try again later",
          "server_error", {}, "server_busy"));
    }
    server_.body_bytes += want;
    body_reserved_ = want;
    parser_->body_limit(body_limit_);
    if (parser_->is_done()) return dispatch();
    // The body is due header_timeout after the request's start.
    arm_read_timer(std::chrono::duration_cast<std::chrono::milliseconds>(
        request_start_ + server_.options.header_timeout - std::chrono::steady_clock::now()));
    // A client that asked to be told before it sends the body.
    if (version_ >= 11 && lower(view(req[bhttp::field::expect])) == "100-continue")
      queue("HTTP/1.1 100 Continue\r\n\r\n");
    phase_ = phase::body;
    reading_ = true;
    do_read_body();
  }

  void answer_preflight() {
    http_response r;
    r.content_type.clear();
    if (allow_origin_.empty()) {
      return answer_early(error_response(403, "origin not allowed by this server's CORS list",
                                         "permission_error", {}, "cors_origin"));
    }
    r.status = 204;
    r.headers = {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
                 {"Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key"},
                 {"Access-Control-Max-Age", "86400"}};
    answer_early(std::move(r));
  }

  void dispatch() {
    cancel_read_timer();
    auto& req = parser_->get();
    auto ex = std::make_shared<exchange>();
    ex->request.method = method_;
    ex->request.path = path_;
    ex->request.query = query_;
    for (const auto& field : req) {
      auto name = lower(view(field.name_string()));
      auto [it, fresh] = ex->request.headers.emplace(name, std::string(field.value()));
      if (!fresh) it->second += ", " + std::string(field.value());
    }
    ex->request.body = std::move(req.body());
    ex->request.remote = remote_;
    ex->params = std::move(match_.params);
    parser_.reset();

    begin_answer();
    phase_ = phase::answering;
    auto r = std::make_shared<server_responder>(weak_from_this(), seq_, executor_);
    responder_ = r;
    ex->out = r;
    watch_for_close();
    if (!reading_) hold_ = shared_from_this();
    spdlog::debug("http {}: {} {}", remote_, method_, target_);

    const handler* h = match_.h;
    if (match_.options.is_public || !server_.authenticate) return run_handler(*h, ex);
    server_.authenticate(ex->request, [h, ex, weak = weak_from_this(), seq = seq_](
                                          const caller* who, http_response error) {
      auto self = weak.lock();
      if (!self || !self->serving(seq)) return;
      if (!who) return ex->out->reply(std::move(error));
      ex->who = *who;
      self->run_handler(*h, ex);
    });
  }

  void run_handler(const handler& h, const std::shared_ptr<exchange>& ex) {
    try {
      h(ex);
    } catch (const std::exception& e) {
      spdlog::error("http {}: {} {}: the handler failed: {}", remote_, method_, path_, e.what());
      ex->out->reply(
          error_response(500, std::string("internal error: ") + e.what(), "server_error"));
    }
  }

  void queue(std::string bytes) {
    if (phase_ == phase::closed || bytes.empty()) return;
    unsent_ += bytes.size();
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    std::vector<asio::const_buffer> buffers;
    size_t i = 0;
    for (auto it = out_.begin(); it != out_.end() && i < write_batch; ++it, ++i) {
      size_t skip = it == out_.begin() ? out_offset_ : 0;
      buffers.emplace_back(it->data() + skip, it->size() - skip);
    }
    writing_ = true;
    write_timer_.expires_after(server_.options.write_timeout);
    write_timer_.async_wait([self = shared_from_this(), this](error_code ec) {
      if (ec || !writing_ || phase_ == phase::closed) return;
      server_.warns.warn("http {}: dropped: took no bytes for {} ms", remote_,
                         server_.options.write_timeout.count());
      close("write timed out");
    });
    do_write_some(std::move(buffers));
  }

  // Every byte of an answer is written: the next request, or the end of the connection.
  void maybe_answer_done() {
    if (!answering_ || !final_queued_ || writing_ || !out_.empty()) return;
    const auto hold = std::move(hold_);  // what comes next holds the session, or it ends
    answering_ = false;
    responder_.reset();
    if (phase_ == phase::draining || !keep_alive_) return linger();
    wait_for_request(server_.options.idle_timeout);
  }

  // Half-closes and reads what the client still sends, then closes.
  void linger() {
    phase_ = phase::draining;
    shutdown_send();
    arm_read_timer(linger_time);
    if (reading_) return;  // its completion goes on draining
    buffer_.consume(buffer_.size());
    read_some();
  }

  phase phase_ = phase::idle;
  asio::steady_timer read_timer_, write_timer_;
  uint64_t read_timer_gen_ = 0;
  std::string remote_;   // address and port, for the log
  std::string address_;  // the client's address, for max_connections_per_address
  uint64_t id_;
  std::chrono::steady_clock::time_point request_start_;  // when this request's time began

  // The request being read or answered.
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::string method_, target_, path_, query_, allow_origin_;
  router::match match_;
  uint64_t body_limit_ = 0;
  uint64_t body_reserved_ = 0;  // this request's share of server_.body_bytes

  // The answer.
  uint64_t seq_ = 0;  // which request's responder may write
  bool answering_ = false;
  bool final_queued_ = false;  // the last bytes of the answer are queued
  bool streaming_ = false;
  bool chunked_ = false;
  std::weak_ptr<server_responder> responder_;

  bool reading_ = false, writing_ = false;
  // The session itself, while it answers with no read or write of its own outstanding: a
  // pipelined request waits in buffer_ (watch_for_close), and the responder holds the session
  // weakly, so nothing else keeps it until the answer is queued.
  std::shared_ptr<session_base> hold_;
  std::deque<std::string> out_;
  size_t out_offset_ = 0;  // bytes of out_.front() already written
  uint64_t unsent_ = 0;
  size_t drained_ = 0;
};

template <class Stream>
class session final : public session_base {
 public:
  session(server_state& server, Stream stream, std::string remote, std::string address, uint64_t id)
      : session_base(server, stream.get_executor(), std::move(remote), std::move(address), id),
        stream_(std::move(stream)) {}

 private:
  auto self() { return std::static_pointer_cast<session>(shared_from_this()); }

  void do_handshake() override {
    if constexpr (requires { stream_.next_layer(); }) {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [s = self()](error_code ec) { s->on_handshake(ec); });
    }
  }
  void do_read_some() override {
    stream_.async_read_some(buffer_.prepare(read_chunk), [s = self()](error_code ec, size_t n) {
      s->buffer_.commit(n);
      s->on_read_some(ec);
    });
  }
  void do_read_header() override {
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [s = self()](error_code ec, size_t) { s->on_request_read(ec); });
  }
  void do_read_body() override {
    bhttp::async_read(stream_, buffer_, *parser_,
                      [s = self()](error_code ec, size_t) { s->on_request_read(ec); });
  }
  void do_write_some(std::vector<asio::const_buffer> buffers) override {
    stream_.async_write_some(buffers,
                             [s = self()](error_code ec, size_t n) { s->on_write(ec, n); });
  }
  void close_socket() override {
    error_code ec;
    beast::get_lowest_layer(stream_).socket().close(ec);
  }
  void shutdown_send() override {
    error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  Stream stream_;
};

using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

// ---- the responder ------------------------------------------------------------------------

std::shared_ptr<session_base> server_responder::live() const {
  return session_.lock();
}

server_responder::~server_responder() {
  auto s = live();
  if (!s || !s->open_for(seq_)) return;
  // A handler that let go of its request without answering it: the client gets an error
  // instead of waiting for ever. A stream let go of before its end is cut off, so that the
  // client sees it broken rather than complete.
  if (!answered_)
    s->reply(seq_,
             error_response(500, "the request was dropped without an answer", "server_error"));
  else
    s->cut_stream(seq_);
}

void server_responder::reply(http_response r) {
  answered_ = true;
  if (auto s = live()) s->reply(seq_, std::move(r));
}

void server_responder::start_events() {
  answered_ = true;
  if (auto s = live()) s->start_events(seq_);
}

// One SSE field per line of `text` ("data: a\ndata: b\n\n" for "a\nb"), so that a line break
// in what a handler sends cannot end the event early or forge another.
std::string sse_lines(std::string_view prefix, std::string_view text) {
  std::string out;
  out.reserve(text.size() + prefix.size() + 2);
  while (true) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out += prefix;
    out += line;
    out += '\n';
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  out += '\n';
  return out;
}

void server_responder::event(std::string_view data) {
  if (auto s = live()) s->send_event(seq_, sse_lines("data: ", data));
}

void server_responder::named_event(std::string_view name, std::string_view data) {
  // The name is one line: what follows a line break in it is left out.
  name = name.substr(0, name.find_first_of("\r\n"));
  if (auto s = live())
    s->send_event(seq_, "event: " + std::string(name) + "\n" + sse_lines("data: ", data));
}

void server_responder::comment(std::string_view text) {
  if (auto s = live()) s->send_event(seq_, sse_lines(": ", text));
}

void server_responder::end_events() {
  if (auto s = live()) s->end_events(seq_);
}

bool server_responder::closed() const {
  auto s = live();
  return gone_ || !s || !s->serving(seq_);
}

void server_responder::on_close(std::function<void()> f) {
  // The client may have gone while the handler was still deciding (authentication, say).
  if (gone_) {
    if (f) asio::post(executor_, std::move(f));
    return;
  }
  on_close_ = std::move(f);
}

}  // namespace

// ---- the server -----------------------------------------------------------------------------

struct http_server::impl {
  gateway_options options;
  const router& routes;
  authenticate_fn authenticate;
  tcp::endpoint endpoint;
  std::unique_ptr<asio::ssl::context> tls;
  server_state state;
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::atomic<uint16_t> port{0};
  std::atomic<bool> bound{false};
  std::unique_ptr<asio::steady_timer> accept_retry;  // goes before the io_context

  impl(const gateway_options& o, const router& r, authenticate_fn a)
      : options(o),
        routes(r),
        authenticate(std::move(a)),
        endpoint(parse_listen(o.listen)),
        tls(load_tls(o)),
        state(options, routes, authenticate),
        ioc(std::make_unique<asio::io_context>(1)),
        accept_retry(std::make_unique<asio::steady_timer>(*ioc)) {
    state.tls = tls.get();
  }

  ~impl() {
    close_all();
    acceptor.reset();
    accept_retry.reset();
    // Handlers still queued hold sessions; they go with the io_context, while the state they
    // point at is still here.
    ioc.reset();
  }

  void close_all() {
    auto sessions = state.sessions;
    for (auto& [id, weak] : sessions)
      if (auto s = weak.lock()) s->close("the server stops");
  }

  void accept() {
    acceptor->async_accept([this](error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {
        // Out of file descriptors, say: try again shortly rather than spin.
        state.warns.warn("http: accept failed: {}", ec.message());
        accept_retry->expires_after(std::chrono::milliseconds(100));
        accept_retry->async_wait([this](error_code e) {
          if (!e && acceptor && acceptor->is_open()) accept();
        });
        return;
      }
      serve(std::move(socket));
      accept();
    });
  }

  void serve(tcp::socket socket) {
    error_code ec;
    auto peer = socket.remote_endpoint(ec);
    if (ec) return;  // already gone
    std::string address = peer.address().to_string();
    std::string remote = peer.address().is_v6() ? "[" + address + "]:" + std::to_string(peer.port())
                                                : address + ":" + std::to_string(peer.port());
    if (auto it = state.by_address.find(address);
        it != state.by_address.end() && it->second.size() >= options.max_connections_per_address &&
        !make_room(it->second, remote, "max_connections_per_address")) {
      return refuse(std::move(socket), remote, "from " + address,
                    options.max_connections_per_address);
    }
    if (state.connections.load() >= options.max_connections &&
        !make_room(state.sessions, remote, "max_connections")) {
      return refuse(std::move(socket), remote, "in all", options.max_connections);
    }
    socket.set_option(tcp::no_delay(true), ec);
    uint64_t id = ++state.next_session_id;
    std::shared_ptr<session_base> s;
    if (tls)
      s = std::make_shared<session<tls_stream>>(state, tls_stream(std::move(socket), *tls), remote,
                                                address, id);
    else
      s = std::make_shared<session<plain_stream>>(state, plain_stream(std::move(socket)), remote,
                                                  address, id);
    state.connections.fetch_add(1);
    state.sessions.emplace(id, s);
    state.by_address[address].insert(id);
    s->start();
  }

  // Closes the oldest of `ids` (sessions by id: oldest first) that has not sent a whole request,
  // to let a new connection in; false when every one is busy with a request.
  template <class Ids>
  bool make_room(const Ids& ids, const std::string& remote, const char* limit) {
    std::shared_ptr<session_base> oldest;
    for (const auto& entry : ids) {
      uint64_t id = 0;
      if constexpr (std::is_same_v<std::decay_t<decltype(entry)>, uint64_t>)
        id = entry;
      else
        id = entry.first;
      auto it = state.sessions.find(id);
      if (it == state.sessions.end()) continue;
      auto s = it->second.lock();
      if (s && s->waiting_for_request()) {
        oldest = std::move(s);
        break;
      }
    }
    if (!oldest) return false;
    state.warns.warn("http {}: closed the oldest connection without a request to let {} in ({})",
                     oldest->remote(), remote, limit);
    oldest->close("made room for a new connection");
    return true;
  }

  // One connection more than a bound whose connections are all busy with requests: a plain
  // client is told 503, then closed; a TLS one is closed (telling it would cost a handshake,
  // which is what is being limited).
  void refuse(tcp::socket socket, const std::string& remote, const std::string& where,
              uint32_t limit) {
    state.warns.warn("http {}: refused: {} connections open {}, each with a request", remote, limit,
                     where);
    if (tls) return;
    auto body = error_response(503,
                               "too many connections " + where + " (" + std::to_string(limit) +
                                   "); try again later",
                               "server_error", {}, "too_many_connections")
                    .body;
    auto text = std::make_shared<std::string>(
        status_line(503) + "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n" + body);
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    // Non-blocking, once: a client that cannot take 300 bytes at once gets just the close.
    sock->non_blocking(true);
    error_code ec;
    asio::write(*sock, asio::buffer(*text), ec);
    sock->shutdown(tcp::socket::shutdown_send, ec);
    sock->close(ec);
  }
};

http_server::http_server(const gateway_options& o, const router& routes,
                         authenticate_fn authenticate)
    : impl_(std::make_unique<impl>(o, routes, std::move(authenticate))) {}

http_server::~http_server() = default;

void http_server::post(std::function<void()> f) {
  asio::post(*impl_->ioc, std::move(f));
}

void http_server::after(std::chrono::milliseconds delay, std::function<void()> f) {
  asio::post(*impl_->ioc, [ioc = impl_->ioc.get(), delay, f = std::move(f)]() mutable {
    auto timer = std::make_shared<asio::steady_timer>(*ioc, delay);
    timer->async_wait([timer, f = std::move(f)](error_code ec) {
      if (!ec) f();
    });
  });
}

void http_server::run(const std::atomic<bool>& stop) {
  auto& m = *impl_;
  m.acceptor = std::make_unique<tcp::acceptor>(*m.ioc);
  error_code ec;
  auto fail = [&](const char* what) {
    m.acceptor.reset();
    throw std::runtime_error("cannot " + std::string(what) + " " + m.options.listen + ": " +
                             ec.message());
  };
  m.acceptor->open(m.endpoint.protocol(), ec);
  if (ec) fail("open a socket for");
  m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (m.endpoint.address().is_v6()) m.acceptor->set_option(asio::ip::v6_only(true), ec);
  m.acceptor->bind(m.endpoint, ec);
  if (ec) fail("bind to");
  m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen on");
  m.port = m.acceptor->local_endpoint().port();
  m.bound = true;
  spdlog::info("http: listening on {} (port {}){}", m.options.listen, m.port.load(),
               m.tls ? " with TLS" : "");
  m.accept();

  auto work = asio::make_work_guard(*m.ioc);
  while (!stop.load()) {
    try {
      m.ioc->run_for(std::chrono::milliseconds(100));
    } catch (const std::exception& e) {
      // A handler threw past its own guard (a broker callback, say): the others go on.
      spdlog::error("http: a task on the I/O thread failed: {}", e.what());
    }
  }
  m.acceptor->close(ec);
  m.accept_retry->cancel();
  m.close_all();
  work.reset();
  // Let the closed connections' handlers finish so that nothing of them is left.
  m.ioc->run_for(std::chrono::milliseconds(200));
  m.ioc->restart();
  m.bound = false;
}

bool http_server::bound() const {
  return impl_->bound.load();
}
uint16_t http_server::port() const {
  return impl_->port.load();
}
size_t http_server::connections() const {
  return impl_->state.connections.load();
}

const std::map<int, uint64_t>& http_server::responses() const {
  return impl_->state.responses;
}

}  // namespace hearth::gateway
