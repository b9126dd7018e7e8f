// HTTP requests of a pull on libcurl: small bodies into memory (the Hub's API, Ollama's
// manifests, config files) and the probe that resolves a download URL. Redirects are followed
// here, by hand, so that a loop is told as one, their number is bounded, and the bearer token goes
// only to the host it is for (huggingface_hub drops it when the Hub redirects to its CDN).
// Everything a server sends is untrusted: sizes bounded, numbers parsed strictly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hearth::pull {

struct pull_options;

// "scheme://host:port" of a URL (lower-case, the port made explicit), "" when it is not an
// http(s) URL. Two URLs are the same host for the token when their origins are equal.
std::string url_origin(const std::string& url);
// `location` (a redirect's Location: absolute, scheme-relative, absolute-path or relative)
// against `base`.
std::string url_resolve(const std::string& base, const std::string& location);
// `s` with everything but unreserved characters percent-encoded (a path component, a revision).
std::string url_escape(const std::string& s);
// The host of a URL, for progress lines ("huggingface.co").
std::string url_host(const std::string& url);

struct http_response {
  long status = 0;
  std::string url;                             // the URL that answered (after redirects)
  std::map<std::string, std::string> headers;  // of that answer, names lower-case
  std::string body;
  // Headers of the first answer (before redirects): the Hub's X-Repo-Commit, X-Linked-Size...
  std::map<std::string, std::string> first_headers;
  std::string header(const std::string& name) const;
};

// What a probe learnt about a download URL.
struct download_source {
  std::string url;    // after redirects: where the Range requests go
  uint64_t size = 0;  // the total the server announces (Content-Range, else Content-Length)
  bool size_known = false;
  bool ranges = false;  // it answered a Range request with 206
  std::map<std::string, std::string> first_headers;
};

// One per pull; not thread-safe.
class http_client {
 public:
  explicit http_client(const pull_options& o);
  // The bearer token and the origin it may be sent to (none when `token` is "").
  void set_token(std::string token, const std::string& for_url);

  // GET into memory (at most `max_bytes`, else pull_error{http}), redirects followed, retried on
  // transient errors. Returns any final status: the caller decides what a 404 means.
  http_response get(const std::string& url, size_t max_bytes,
                    const std::vector<std::string>& headers = {});
  // A GET of byte 0 (Range: bytes=0-0), redirects followed: the URL to download from, the size
  // and whether Range requests work. Throws pull_error (bad_source for 404, http otherwise).
  download_source probe(const std::string& url);

  // The Authorization header for `url`, or "" (the token's origin only).
  std::string auth_header(const std::string& url) const;
  const pull_options& options() const { return options_; }

 private:
  http_response get_once(const std::string& url, size_t max_bytes,
                         const std::vector<std::string>& headers, bool stop_after_one_byte);

  const pull_options& options_;
  std::string token_, token_origin_;
};

// Whether a status is worth retrying (408, 429, 5xx).
bool http_status_transient(long status);
// Whether a libcurl result (CURLcode) is worth retrying: a connection refused, lost or stalled,
// a body shorter than announced.
bool curl_code_transient(int code);

}  // namespace hearth::pull
