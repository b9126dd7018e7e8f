// The gateway's view of HTTP, independent of the HTTP library (Boost.Beast lives only in
// http-server.cpp): a parsed request, a whole response, and the responder through which a handler
// answers — at once, later (after the broker replied), or as a stream of Server-Sent Events.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::gateway {

struct http_request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // percent-decoded, without the query ("/v1/models/stories260K")
  std::string query;   // the raw text after '?', "" when none
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string remote;  // the client's address, "ip:port"

  // The header's value, "" when absent (`name` in lower case).
  std::string header(std::string_view name) const;
  // The percent-decoded value of query parameter `name`, "" when absent.
  std::string query_param(std::string_view name) const;
};

struct http_response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with `status`.
// `type` is OpenAI's ("invalid_request_error", "authentication_error", "not_found_error",
// "rate_limit_error", "server_error", ...); `param` and `code` are null when empty.
http_response error_response(int status, std::string_view message, std::string_view type,
                             std::string_view param = {}, std::string_view code = {});

// `body`, an error in OpenAI's shape ({"error": {"message", ...}}) or a batch line's
// ({"code", "message"}), at most `max` bytes (at least 1024): a longer one has its message cut to
// its first 512 bytes (whole characters), saying how long it was; failing that, it is replaced by
// a server_error naming its size. Keeps what a peer's long message makes the gateway store bounded.
std::string error_body_bounded(std::string body, size_t max);

// One request's way back to its client. Every method is called on the gateway's I/O thread (the
// thread handlers run on; the broker link delivers its callbacks there too).
class responder {
 public:
  virtual ~responder() = default;
  // The whole answer; once. Ignored after the client went away.
  virtual void reply(http_response r) = 0;
  // Starts an answer of Server-Sent Events (text/event-stream, no Content-Length, chunked):
  // status 200 and the headers now, then event() any number of times, then end_events().
  virtual void start_events() = 0;
  // Writes "data: <data>\n\n" (one SSE event; `data` holds no newline).
  virtual void event(std::string_view data) = 0;
  // Writes "event: <name>\ndata: <data>\n\n": an event with a type, as Anthropic's Messages API
  // streams (its SDK drops events without one) and OpenAI's Responses API. The default leaves
  // the name out (responders that record events for tests).
  virtual void named_event(std::string_view name, std::string_view data) {
    (void)name;
    event(data);
  }
  // Writes an SSE comment line (": <text>\n\n"): a keep-alive that clients ignore.
  virtual void comment(std::string_view text) = 0;
  virtual void end_events() = 0;
  // The client disconnected, or was dropped (a write stalled, or its unsent bytes passed the
  // limit): nothing more reaches it.
  virtual bool closed() const = 0;
  // `f` runs once, on the I/O thread, when the client goes away before the answer ended (so
  // the handler can cancel its job). Replaces an earlier one.
  virtual void on_close(std::function<void()> f) = 0;
};

// Who made a request, as the broker knows them (whoami, schema/messages.h).
struct caller {
  std::string api_key;  // the secret presented; "" when none (the gateway acts as itself)
  std::string owner;    // what the broker records as the owner of this caller's jobs
  std::string name;     // the API key's name ("" when none)
  bool admin = false;   // sees every job
};

// One request on its way through a handler: held by shared_ptr so that callbacks that answer
// later keep it alive.
struct exchange {
  http_request request;
  std::map<std::string, std::string> params;  // from the route pattern: {id} -> "..."
  caller who;
  std::shared_ptr<responder> out;
};

using handler = std::function<void(std::shared_ptr<exchange>)>;

}  // namespace hearth::gateway
