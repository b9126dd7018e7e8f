#include "store/digest-cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <vector>

#include "store/file-io.h"
#include "store/sha256.h"

namespace hearth::store {

namespace {

// The cache holds a line per file of a models directory: 64 MiB is far beyond any.
constexpr size_t k_digest_cache_max_bytes = size_t(64) << 20;

// The key of a file: its absolute path, so that a daemon's relative models directory and an
// absolute one name the same entry.
std::string digest_cache_key(const std::filesystem::path& file) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(file, ec);
  return (ec ? file : abs).lexically_normal().string();
}

bool digest_cache_stat(const std::filesystem::path& file, uint64_t& size, int64_t& mtime_ns) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  size = uint64_t(st.st_size);
  mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

// sha256_file that stops when `cancel` turns true.
std::optional<std::string> digest_cache_hash(const std::filesystem::path& file,
                                             const std::atomic<bool>* cancel) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  sha256 h;
  std::vector<char> buf(size_t(4) << 20);
  for (;;) {
    if (cancel && cancel->load()) {
      ::close(fd);
      return std::nullopt;
    }
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
  }
  ::close(fd);
  return h.finish();
}

}  // namespace

digest_cache::digest_cache(std::filesystem::path file) : file_(std::move(file)) {
  std::string text;
  if (!read_small_file(file_, k_digest_cache_max_bytes, text)) return;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object()) return;
  for (const auto& [path, e] : j["files"].items()) {
    if (!e.is_object()) continue;
    auto size = e.find("size");
    auto mtime = e.find("mtime_ns");
    auto digest = e.find("digest");
    if (size == e.end() || !size->is_number_unsigned() || mtime == e.end() ||
        !mtime->is_number_integer() || digest == e.end() || !digest->is_string() ||
        !sha256_digest_valid(digest->get<std::string>()))
      continue;
    entries_[path] = {size->get<uint64_t>(), mtime->get<int64_t>(), digest->get<std::string>()};
  }
}

std::optional<std::string> digest_cache::known(const std::filesystem::path& file) const {
  uint64_t size = 0;
  int64_t mtime = 0;
  if (!digest_cache_stat(file, size, mtime)) return std::nullopt;
  std::lock_guard lk(mu_);
  auto it = entries_.find(digest_cache_key(file));
  if (it == entries_.end() || it->second.size != size || it->second.mtime_ns != mtime)
    return std::nullopt;
  return it->second.digest;
}

std::optional<std::string> digest_cache::digest(const std::filesystem::path& file,
                                                const std::atomic<bool>* cancel) {
  if (auto d = known(file)) return d;
  uint64_t size = 0, size_after = 0;
  int64_t mtime = 0, mtime_after = 0;
  if (!digest_cache_stat(file, size, mtime)) return std::nullopt;
  auto d = digest_cache_hash(file, cancel);
  if (!d) return std::nullopt;
  ++hashed_;
  // Remembered only for the size and time it had all along: a file still being copied is
  // hashed again once it is still.
  if (digest_cache_stat(file, size_after, mtime_after) && size_after == size &&
      mtime_after == mtime) {
    std::lock_guard lk(mu_);
    entries_[digest_cache_key(file)] = {size, mtime, *d};
    dirty_ = true;
  }
  return d;
}

std::optional<std::filesystem::path> digest_cache::path_of(std::string_view digest) const {
  std::vector<std::pair<std::string, entry>> candidates;
  {
    std::lock_guard lk(mu_);
    for (const auto& [path, e] : entries_)
      if (e.digest == digest) candidates.emplace_back(path, e);
  }
  for (const auto& [path, e] : candidates) {
    uint64_t size = 0;
    int64_t mtime = 0;
    if (digest_cache_stat(path, size, mtime) && size == e.size && mtime == e.mtime_ns) return path;
  }
  return std::nullopt;
}

void digest_cache::retain(const std::set<std::string>& paths) {
  std::set<std::string> keep;
  for (const auto& p : paths) keep.insert(digest_cache_key(p));
  std::lock_guard lk(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (keep.count(it->first)) {
      ++it;
    } else {
      it = entries_.erase(it);
      dirty_ = true;
    }
  }
}

void digest_cache::save() {
  nlohmann::json files = nlohmann::json::object();
  {
    std::lock_guard lk(mu_);
    if (!dirty_) return;
    for (const auto& [path, e] : entries_)
      files[path] = {{"size", e.size}, {"mtime_ns", e.mtime_ns}, {"digest", e.digest}};
    dirty_ = false;
  }
  // Paths are bytes, not always UTF-8: replaced characters rather than an exception.
  write_file_atomic(file_, nlohmann::json{{"version", 1}, {"files", files}}.dump(
                               1, ' ', false, nlohmann::json::error_handler_t::replace) +
                               "\n");
}

}  // namespace hearth::store
