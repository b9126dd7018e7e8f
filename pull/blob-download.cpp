#include "pull/blob-download.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <memory>
#include <thread>

#include "pull/pull.h"

namespace hearth::pull {

namespace {

using download_clock = std::chrono::steady_clock;

// A part of the blob still to fetch: [offset, end).
struct blob_piece {
  uint64_t offset = 0, end = 0;
  int failures = 0;  // attempts in a row that brought no byte
  download_clock::time_point not_before{};
};

// One Range request in flight.
struct piece_request {
  blob_piece piece;
  store::partial_blob* blob = nullptr;
  uint64_t blob_size = 0;
  bool ranges = true;
  uint64_t flush_bytes = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  long status = 0;
  bool checked = false;  // the status and Content-Range were looked at (first body bytes)
  uint64_t pos = 0;      // the next byte to write
  uint64_t flushed = 0;  // bytes before this are marked done
  std::string error;     // set by a callback that refused the answer
  bool fatal = false;    // ... for good (not worth a retry)
  std::string content_range, content_length;
  std::chrono::steady_clock::time_point flushed_at = std::chrono::steady_clock::now();

  // Marks what was written and not yet marked done: it survives a kill from now on.
  void flush() {
    if (pos > flushed) {
      blob->mark_done(flushed, pos - flushed);
      flushed = pos;
      flushed_at = std::chrono::steady_clock::now();
    }
  }
};

size_t on_piece_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<piece_request*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    const auto sp = line.find(' ');
    r->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    r->content_range.clear();
    r->content_length.clear();
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (char& c : name) c = char(std::tolower(uint8_t(c)));
  std::string value = line.substr(colon + 1);
  value.erase(0, std::min(value.size(), value.find_first_not_of(" \t")));
  if (name == "content-range") r->content_range = value;
  if (name == "content-length") r->content_length = value;
  return size * n;
}

// "bytes A-B/T" with A, B, T decimal; false for anything else.
bool parse_content_range(const std::string& s, uint64_t& a, uint64_t& b, uint64_t& total) {
  unsigned long long x = 0, y = 0, t = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "bytes %llu-%llu/%llu%c", &x, &y, &t, &tail) != 3) return false;
  a = x;
  b = y;
  total = t;
  return true;
}

// The answer's status and range, checked before its first byte is written.
bool piece_answer_ok(piece_request* r) {
  const uint64_t want = r->piece.end - r->pos;
  if (r->ranges) {
    if (r->status != 206) {
      r->error = "HTTP " + std::to_string(r->status) + " to a Range request";
      r->fatal = !http_status_transient(r->status);
      return false;
    }
    uint64_t a = 0, b = 0, total = 0;
    if (!parse_content_range(r->content_range, a, b, total) || a != r->pos || b < a ||
        total != r->blob_size) {
      r->error = "Content-Range '" + r->content_range + "' does not answer bytes " +
                 std::to_string(r->pos) + "-" + std::to_string(r->piece.end - 1) + "/" +
                 std::to_string(r->blob_size);
      r->fatal = true;
      return false;
    }
    if (b - a + 1 > want) {
      r->error = "the server sends more bytes than asked (" + r->content_range + ")";
      r->fatal = true;
      return false;
    }
  } else if (r->status != 200) {
    r->error = "HTTP " + std::to_string(r->status);
    r->fatal = !http_status_transient(r->status);
    return false;
  }
  if (!r->content_length.empty()) {
    char* end = nullptr;
    const unsigned long long cl = std::strtoull(r->content_length.c_str(), &end, 10);
    if (end == r->content_length.c_str() || *end != 0 || cl > want) {
      r->error = "the server announces " + r->content_length + " bytes where " +
                 std::to_string(want) + " remain";
      r->fatal = true;
      return false;
    }
  }
  return true;
}

size_t on_piece_body(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<piece_request*>(user);
  const size_t len = size * n;
  if (!r->checked) {
    r->checked = true;
    if (!piece_answer_ok(r)) return 0;
  }
  if (r->pos + len > r->piece.end) {
    r->error = "the server sent more bytes than it announced (" +
               std::to_string(r->pos + len - r->piece.offset) + " for a range of " +
               std::to_string(r->piece.end - r->piece.offset) + ")";
    r->fatal = true;
    return 0;
  }
  try {
    r->blob->write(r->pos, data, len);
    r->pos += len;
    // Durable every flush_bytes, and at least every second on a slow link: a kill loses little.
    if (r->pos - r->flushed >= r->flush_bytes ||
        std::chrono::steady_clock::now() - r->flushed_at >= std::chrono::seconds(1))
      r->flush();
  } catch (const std::exception& e) {
    r->error = std::string("writing the blob: ") + e.what();
    r->fatal = true;
    return 0;
  }
  return len;
}

// The multi handle and the requests in flight; whatever way download_blob leaves, every
// request's written bytes are marked done (kept for a resume) and every handle freed.
struct piece_transfers {
  CURLM* multi = curl_multi_init();
  std::list<piece_request> active;

  ~piece_transfers() {
    for (auto& r : active) release(r);
    curl_multi_cleanup(multi);
  }
  void release(piece_request& r) {
    try {
      r.flush();
    } catch (...) {  // a failing disk: the bytes are fetched again next time
    }
    curl_multi_remove_handle(multi, r.easy);
    curl_easy_cleanup(r.easy);
    curl_slist_free_all(r.headers);
    r.easy = nullptr;
    r.headers = nullptr;
  }
};

}  // namespace

void download_blob(http_client& http, store::partial_blob& blob, const download_source& src,
                   const blob_progress_fn& progress, const std::atomic<bool>* cancel) {
  const pull_options& o = http.options();
  std::deque<blob_piece> pending;
  const auto missing = blob.missing();
  if (!src.ranges) {
    if (missing.size() != 1 || missing[0].offset != 0 || missing[0].length != blob.size()) {
      throw pull_error(pull_error_kind::http,
                       src.url + " does not take Range requests: the partial blob cannot resume");
    }
    pending.push_back({0, blob.size()});
  } else {
    const uint64_t step = std::max<uint64_t>(o.piece_bytes, 1);
    for (const auto& m : missing) {
      for (uint64_t at = m.offset; at < m.offset + m.length; at += step)
        pending.push_back({at, std::min(m.offset + m.length, at + step)});
    }
  }
  const uint64_t done_before = blob.bytes_done();
  uint64_t written = 0;  // by requests that ended
  const int connections = src.ranges ? std::max(1, o.connections) : 1;
  const std::string auth = http.auth_header(src.url);

  piece_transfers t;
  auto start = [&](blob_piece p) {
    piece_request& r = t.active.emplace_back();
    r.piece = p;
    r.blob = &blob;
    r.blob_size = blob.size();
    r.ranges = src.ranges;
    r.flush_bytes = std::max<uint64_t>(o.flush_bytes, 1);
    r.pos = r.flushed = p.offset;
    r.easy = curl_easy_init();
    if (src.ranges) {
      const std::string range =
          "Range: bytes=" + std::to_string(p.offset) + "-" + std::to_string(p.end - 1);
      r.headers = curl_slist_append(r.headers, range.c_str());
    }
    if (!auth.empty()) r.headers = curl_slist_append(r.headers, auth.c_str());
    r.headers = curl_slist_append(r.headers, "Accept-Encoding: identity");
    curl_easy_setopt(r.easy, CURLOPT_URL, src.url.c_str());
    curl_easy_setopt(r.easy, CURLOPT_HTTPHEADER, r.headers);
    curl_easy_setopt(r.easy, CURLOPT_USERAGENT, "hearth-pull/0.1");
    curl_easy_setopt(r.easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(r.easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(r.easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r.easy, CURLOPT_CONNECTTIMEOUT, 15L);
    // A connection that brings nothing for a minute is lost: retried like a dropped one.
    curl_easy_setopt(r.easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(r.easy, CURLOPT_LOW_SPEED_TIME, 60L);
    if (o.rate_limit > 0) {
      curl_easy_setopt(r.easy, CURLOPT_MAX_RECV_SPEED_LARGE,
                       curl_off_t(std::max<uint64_t>(1, o.rate_limit / uint64_t(connections))));
    }
    curl_easy_setopt(r.easy, CURLOPT_HEADERFUNCTION, on_piece_header);
    curl_easy_setopt(r.easy, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(r.easy, CURLOPT_WRITEFUNCTION, on_piece_body);
    curl_easy_setopt(r.easy, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(r.easy, CURLOPT_PRIVATE, &r);
    curl_multi_add_handle(t.multi, r.easy);
  };

  auto last_report = download_clock::now() - std::chrono::seconds(1);
  auto report = [&](bool force) {
    if (!progress) return;
    const auto now = download_clock::now();
    if (!force && now - last_report < std::chrono::milliseconds(100)) return;
    last_report = now;
    uint64_t in_flight = 0;
    for (const auto& r : t.active) in_flight += r.pos - r.piece.offset;
    progress(done_before + written + in_flight);
  };

  while (!pending.empty() || !t.active.empty()) {
    if (cancel && cancel->load()) {
      throw pull_error(pull_error_kind::cancelled, "cancelled");
    }
    const auto now = download_clock::now();
    while (int(t.active.size()) < connections) {
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const blob_piece& p) { return p.not_before <= now; });
      if (it == pending.end()) break;
      start(*it);
      pending.erase(it);
    }
    int running = 0;
    curl_multi_perform(t.multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(t.multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      piece_request* r = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&r));
      const CURLcode code = msg->data.result;
      auto it = std::find_if(t.active.begin(), t.active.end(),
                             [&](const piece_request& a) { return &a == r; });
      blob_piece p = r->piece;
      const uint64_t got = r->pos - p.offset;
      std::string error = r->error;
      bool fatal = r->fatal;
      const bool complete = code == CURLE_OK && r->pos == p.end;
      if (!r->checked && code == CURLE_OK && p.end > p.offset) {
        // No body at all: an error status with nothing to say, or an empty 206.
        r->checked = true;
        if (!piece_answer_ok(r)) {
          error = r->error;
          fatal = r->fatal;
        } else {
          error = "an empty answer";
        }
      }
      t.release(*r);
      written += got;
      t.active.erase(it);
      if (complete) continue;
      if (error.empty()) {
        error = code == CURLE_OK ? "the body ended early (truncated)" : curl_easy_strerror(code);
        fatal = code != CURLE_OK && !curl_code_transient(code);
      }
      if (fatal) throw pull_error(pull_error_kind::http, src.url + ": " + error);
      p.offset += got;
      p.failures = got > 0 ? 0 : p.failures + 1;
      if (p.failures > o.retries) {
        throw pull_error(pull_error_kind::http, src.url + ": " + error + " (after " +
                                                    std::to_string(o.retries) + " retries)");
      }
      const int ms = std::min(8000, o.retry_backoff_ms << std::min(p.failures, 10));
      p.not_before = download_clock::now() + std::chrono::milliseconds(ms);
      pending.push_back(p);
    }
    report(false);
    if (!t.active.empty()) {
      curl_multi_poll(t.multi, nullptr, 0, 100, nullptr);
    } else if (!pending.empty()) {
      // Every piece waits for its backoff.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  report(true);
}

}  // namespace hearth::pull
