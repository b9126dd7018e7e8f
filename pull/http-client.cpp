#include "pull/http-client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "pull/pull.h"

namespace hearth::pull {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

// curl_global_init once per process, before the first handle (it is not thread-safe itself).
void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct easy_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// What one request collects. A new status line (an interim 100, or the next answer of a
// redirect curl followed) starts the headers over.
struct response_sink {
  http_response* r;
  size_t max_bytes;
  bool stop_after_one_byte;
  bool overflow = false;
  bool stopped = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<response_sink*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    s->r->headers.clear();
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string value = line.substr(colon + 1);
  const auto first = value.find_first_not_of(" \t");
  value = first == std::string::npos ? "" : value.substr(first);
  s->r->headers[lower(line.substr(0, colon))] = value;
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<response_sink*>(user);
  if (s->stop_after_one_byte) {
    s->stopped = true;
    return 0;  // enough: the probe wants the headers
  }
  if (s->r->body.size() + size * n > s->max_bytes) {
    s->overflow = true;
    return 0;
  }
  s->r->body.append(data, size * n);
  return size * n;
}

// A transient failure of one request, retried by the caller.
struct transient_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void backoff_sleep(const pull_options& o, int attempt) {
  const int ms = std::min(8000, o.retry_backoff_ms << std::min(attempt, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

std::string http_response::header(const std::string& name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? "" : it->second;
}

std::string url_origin(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return "";
  const auto host_start = scheme_end + 3;
  auto host_end = url.find_first_of("/?#", host_start);
  if (host_end == std::string::npos) host_end = url.size();
  std::string authority = lower(url.substr(host_start, host_end - host_start));
  if (const auto at = authority.rfind('@'); at != std::string::npos) {
    authority = authority.substr(at + 1);
  }
  const auto colon = authority.rfind(':');
  const bool has_port =
      colon != std::string::npos && authority.find(']', colon) == std::string::npos;
  if (!has_port) authority += scheme == "https" ? ":443" : ":80";
  return scheme + "://" + authority;
}

std::string url_host(const std::string& url) {
  std::string o = url_origin(url);
  if (o.empty()) return url;
  o = o.substr(o.find("://") + 3);
  for (const char* p : {":443", ":80"}) {
    if (o.size() > std::char_traits<char>::length(p) &&
        o.compare(o.size() - std::char_traits<char>::length(p), std::string::npos, p) == 0)
      return o.substr(0, o.size() - std::char_traits<char>::length(p));
  }
  return o;
}

std::string url_resolve(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  const auto scheme_end = base.find("://");
  if (location.rfind("//", 0) == 0) return base.substr(0, scheme_end + 1) + location;
  auto host_end = base.find_first_of("/?#", scheme_end + 3);
  if (host_end == std::string::npos) host_end = base.size();
  if (!location.empty() && location[0] == '/') return base.substr(0, host_end) + location;
  // Relative to the base's folder.
  std::string path = base.substr(0, base.find_first_of("?#", host_end));
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash < host_end)
    return base.substr(0, host_end) + "/" + location;
  return path.substr(0, slash + 1) + location;
}

std::string url_escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool curl_code_transient(int code) {
  switch (CURLcode(code)) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

bool http_status_transient(long status) {
  return status == 408 || status == 429 || status >= 500;
}

http_client::http_client(const pull_options& o) : options_(o) {
  curl_init_once();
}

void http_client::set_token(std::string token, const std::string& for_url) {
  token_ = std::move(token);
  token_origin_ = token_.empty() ? "" : url_origin(for_url);
}

std::string http_client::auth_header(const std::string& url) const {
  if (token_.empty() || url_origin(url) != token_origin_) return "";
  return "Authorization: Bearer " + token_;
}

http_response http_client::get_once(const std::string& url, size_t max_bytes,
                                    const std::vector<std::string>& headers,
                                    bool stop_after_one_byte) {
  http_response r;
  std::set<std::string> seen;
  std::string at = url;
  for (int hop = 0;; ++hop) {
    if (!seen.insert(at).second) {
      throw pull_error(pull_error_kind::http, "redirect loop at " + at);
    }
    if (hop > options_.max_redirects) {
      throw pull_error(
          pull_error_kind::http,
          "more than " + std::to_string(options_.max_redirects) + " redirects from " + url);
    }
    std::unique_ptr<CURL, easy_deleter> c(curl_easy_init());
    if (!c) throw pull_error(pull_error_kind::http, "curl_easy_init failed");
    std::unique_ptr<curl_slist, slist_deleter> list;
    auto add = [&](const std::string& h) {
      list.reset(curl_slist_append(list.release(), h.c_str()));
    };
    for (const auto& h : headers) add(h);
    if (const auto a = auth_header(at); !a.empty()) add(a);
    if (stop_after_one_byte) add("Range: bytes=0-0");
    r.headers.clear();
    r.body.clear();
    response_sink sink{&r, max_bytes, stop_after_one_byte};
    curl_easy_setopt(c.get(), CURLOPT_URL, at.c_str());
    curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, list.get());
    curl_easy_setopt(c.get(), CURLOPT_USERAGENT, "hearth-pull/0.1");
    curl_easy_setopt(c.get(), CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c.get(), CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &sink);
    const CURLcode code = curl_easy_perform(c.get());
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &r.status);
    r.url = at;
    if (sink.overflow) {
      throw pull_error(pull_error_kind::http,
                       at + " sent more than " + std::to_string(max_bytes) + " bytes");
    }
    if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && sink.stopped)) {
      const std::string what = at + ": " + curl_easy_strerror(code);
      if (curl_code_transient(code)) throw transient_failure(what);
      throw pull_error(pull_error_kind::http, what);
    }
    if (hop == 0) r.first_headers = r.headers;
    if (r.status >= 300 && r.status < 400 && r.status != 304) {
      const std::string loc = r.header("location");
      if (loc.empty()) {
        throw pull_error(pull_error_kind::http,
                         at + " redirects (" + std::to_string(r.status) + ") without a Location");
      }
      at = url_resolve(at, loc);
      continue;
    }
    return r;
  }
}

http_response http_client::get(const std::string& url, size_t max_bytes,
                               const std::vector<std::string>& headers) {
  for (int attempt = 0;; ++attempt) {
    try {
      http_response r = get_once(url, max_bytes, headers, false);
      if (http_status_transient(r.status) && attempt < options_.retries) {
        backoff_sleep(options_, attempt);
        continue;
      }
      return r;
    } catch (const transient_failure& e) {
      if (attempt >= options_.retries) {
        throw pull_error(pull_error_kind::http, std::string(e.what()) + " (after " +
                                                    std::to_string(attempt) + " retries)");
      }
      backoff_sleep(options_, attempt);
    }
  }
}

download_source http_client::probe(const std::string& url) {
  for (int attempt = 0;; ++attempt) {
    http_response r;
    try {
      r = get_once(url, 1, {}, true);
    } catch (const transient_failure& e) {
      if (attempt >= options_.retries) {
        throw pull_error(pull_error_kind::http, std::string(e.what()) + " (after " +
                                                    std::to_string(attempt) + " retries)");
      }
      backoff_sleep(options_, attempt);
      continue;
    }
    if (http_status_transient(r.status) && attempt < options_.retries) {
      backoff_sleep(options_, attempt);
      continue;
    }
    if (r.status == 404 || r.status == 401 || r.status == 403) {
      throw pull_error(pull_error_kind::bad_source,
                       r.url + ": HTTP " + std::to_string(r.status) +
                           (r.status == 404 ? " (not found)" : " (needs a token: set HF_TOKEN)"));
    }
    download_source d;
    d.url = r.url;
    d.first_headers = r.first_headers;
    if (r.status == 206) {
      // Content-Range: bytes 0-0/TOTAL
      const std::string cr = r.header("content-range");
      const auto slash = cr.rfind('/');
      if (slash == std::string::npos || cr.rfind("bytes 0-", 0) != 0) {
        throw pull_error(pull_error_kind::http, r.url + ": bad Content-Range '" + cr + "'");
      }
      const std::string total = cr.substr(slash + 1);
      if (total != "*") {
        if (total.empty() || total.size() > 19 ||
            !std::all_of(total.begin(), total.end(), [](char c) { return c >= '0' && c <= '9'; }))
          throw pull_error(pull_error_kind::http, r.url + ": bad Content-Range '" + cr + "'");
        d.size = std::stoull(total);
        d.size_known = true;
      }
      d.ranges = true;
      return d;
    }
    if (r.status == 200) {
      const std::string cl = r.header("content-length");
      if (!cl.empty() && cl.size() <= 19 &&
          std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        d.size = std::stoull(cl);
        d.size_known = true;
      }
      return d;
    }
    throw pull_error(pull_error_kind::http, r.url + ": HTTP " + std::to_string(r.status));
  }
}

}  // namespace hearth::pull
