#include "store/partial-blob.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "store/file-io.h"
#include "store/sha256.h"
#include "store/store-error.h"

namespace hearth::store {

namespace {

// The journal (.ranges): a header, then one record per mark_done. Records are appended and
// fdatasync'd; each carries a check word, so a record torn by a crash (or bytes that are not a
// journal) is told from a real one and everything from it on is ignored: those ranges are
// fetched again, which is always safe.
constexpr uint64_t k_ranges_magic = 0x31676e6172687468ULL;  // "hthrang1"
struct ranges_header {
  uint64_t magic, size;
};
struct ranges_record {
  uint64_t offset, length, check;
};
uint64_t ranges_record_check(uint64_t offset, uint64_t length) {
  return (offset * 0x9e3779b97f4a7c15ULL) ^ (length + k_ranges_magic);
}

void write_all(int fd, const void* data, size_t n, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw_errno(errno, what);
    p += w;
    n -= size_t(w);
  }
}

uint64_t free_bytes(const std::filesystem::path& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return 0;
  return uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
}

}  // namespace

partial_blob::partial_blob(std::filesystem::path partial_dir, std::filesystem::path blobs_dir,
                           std::string digest, uint64_t size)
    : partial_dir_(std::move(partial_dir)),
      blobs_dir_(std::move(blobs_dir)),
      digest_(std::move(digest)),
      size_(size) {
  if (!sha256_digest_valid(digest_)) throw std::invalid_argument("not a digest: " + digest_);
  open_files();
}

partial_blob::~partial_blob() {
  close_files();
}

std::filesystem::path partial_blob::part_path() const {
  return partial_dir_ / ("sha256-" + std::string(sha256_digest_hex(digest_)) + ".part");
}

std::filesystem::path partial_blob::ranges_path() const {
  return partial_dir_ / ("sha256-" + std::string(sha256_digest_hex(digest_)) + ".ranges");
}

void partial_blob::open_files() {
  const auto part = part_path();
  // Locks the .part that is at the path once locked: another writer may have committed (renamed)
  // or discarded (unlinked) the file between our open and our flock.
  for (;;) {
    part_fd_ = ::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (part_fd_ < 0) throw_errno(errno, "opening " + part.string());
    if (::flock(part_fd_, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      close_files();
      if (e == EWOULDBLOCK) throw blob_busy(digest_);
      throw_errno(e, "locking " + part.string());
    }
    struct stat held {
    }, at_path{};
    if (::fstat(part_fd_, &held) != 0) {
      int e = errno;
      close_files();
      throw_errno(e, "stat of " + part.string());
    }
    if (::stat(part.c_str(), &at_path) == 0 && at_path.st_ino == held.st_ino &&
        at_path.st_dev == held.st_dev) {
      if (uint64_t(held.st_size) == size_) {
        load_journal();
      } else {
        // New, or a previous try at another size: nothing in it counts.
        if (::ftruncate(part_fd_, 0) != 0) {
          int e = errno;
          close_files();
          throw_errno(e, "truncating " + part.string());
        }
        if (size_ > 0) {
          int e = ::posix_fallocate(part_fd_, 0, off_t(size_));
          if (e != 0) {
            uint64_t available = free_bytes(partial_dir_);
            close_files();
            ::unlink(part.c_str());
            if (e == ENOSPC || e == EFBIG) throw no_space(size_, available);
            throw_errno(e, "preallocating " + part.string());
          }
        }
        rewrite_journal();
      }
      return;
    }
    close_files();
  }
}

void partial_blob::load_journal() {
  std::string bytes;
  // A journal holds a record per mark_done; compacted at every open, so this bounds nothing a
  // writer needs (64 MiB: millions of records).
  bool ok = read_small_file(ranges_path(), size_t(64) << 20, bytes);
  if (ok && bytes.size() >= sizeof(ranges_header)) {
    ranges_header h;
    std::memcpy(&h, bytes.data(), sizeof h);
    if (h.magic == k_ranges_magic && h.size == size_) {
      for (size_t at = sizeof h; at + sizeof(ranges_record) <= bytes.size();
           at += sizeof(ranges_record)) {
        ranges_record r;
        std::memcpy(&r, bytes.data() + at, sizeof r);
        if (r.check != ranges_record_check(r.offset, r.length) || r.offset > size_ ||
            r.length > size_ - r.offset)
          break;
        if (r.length) add_done(r.offset, r.offset + r.length);
      }
    }
  }
  rewrite_journal();
}

void partial_blob::rewrite_journal() {
  std::string bytes;
  ranges_header h{k_ranges_magic, size_};
  bytes.append(reinterpret_cast<const char*>(&h), sizeof h);
  for (auto [offset, end] : done_) {
    ranges_record r{offset, end - offset, ranges_record_check(offset, end - offset)};
    bytes.append(reinterpret_cast<const char*>(&r), sizeof r);
  }
  const auto ranges = ranges_path();
  write_file_atomic(ranges, bytes);
  if (ranges_fd_ >= 0) ::close(ranges_fd_);
  ranges_fd_ = ::open(ranges.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (ranges_fd_ < 0) throw_errno(errno, "opening " + ranges.string());
}

void partial_blob::close_files() {
  if (ranges_fd_ >= 0) ::close(ranges_fd_);
  if (part_fd_ >= 0) ::close(part_fd_);
  ranges_fd_ = part_fd_ = -1;
}

void partial_blob::add_done(uint64_t offset, uint64_t end) {
  // Merges with every range it touches or overlaps.
  auto it = done_.upper_bound(offset);
  if (it != done_.begin() && std::prev(it)->second >= offset) --it;
  while (it != done_.end() && it->first <= end) {
    offset = std::min(offset, it->first);
    end = std::max(end, it->second);
    done_bytes_ -= it->second - it->first;
    it = done_.erase(it);
  }
  done_.emplace(offset, end);
  done_bytes_ += end - offset;
}

std::vector<byte_range> partial_blob::missing() const {
  std::lock_guard lock(mutex_);
  std::vector<byte_range> out;
  uint64_t at = 0;
  for (auto [offset, end] : done_) {
    if (offset > at) out.push_back({at, offset - at});
    at = end;
  }
  if (at < size_) out.push_back({at, size_ - at});
  return out;
}

uint64_t partial_blob::bytes_hashed() const {
  std::lock_guard lock(write_mutex_);
  return hashed_;
}

uint64_t partial_blob::bytes_done() const {
  std::lock_guard lock(mutex_);
  return done_bytes_;
}

void partial_blob::write(uint64_t offset, const void* data, size_t n) {
  if (finished_) throw std::logic_error("write to a finished partial blob " + digest_);
  if (offset > size_ || n > size_ - offset)
    throw std::out_of_range("write past the end of blob " + digest_);
  std::lock_guard lock(write_mutex_);
  if (offset < hashed_) {
    // Bytes the digest has seen are written again: it starts over, and commit() reads the file.
    hashed_digest_ = std::make_unique<sha256>();
    hashed_ = 0;
  }
  const bool continues = offset == hashed_;
  const uint64_t start = offset;
  const size_t length = n;
  auto* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::pwrite(part_fd_, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw_errno(errno, "writing " + part_path().string());
    p += w;
    n -= size_t(w);
    offset += uint64_t(w);
  }
  if (continues) {
    hashed_digest_->update(data, length);
    hashed_ = start + length;
  }
}

void partial_blob::mark_done(uint64_t offset, uint64_t length) {
  if (finished_) throw std::logic_error("mark_done on a finished partial blob " + digest_);
  if (offset > size_ || length > size_ - offset)
    throw std::out_of_range("range past the end of blob " + digest_);
  if (length == 0) return;
  // The data first: a journaled range is on disk.
  if (::fdatasync(part_fd_) != 0) throw_errno(errno, "fdatasync of " + part_path().string());
  std::lock_guard lock(mutex_);
  ranges_record r{offset, length, ranges_record_check(offset, length)};
  write_all(ranges_fd_, &r, sizeof r, "appending to " + ranges_path().string());
  if (::fdatasync(ranges_fd_) != 0) throw_errno(errno, "fdatasync of " + ranges_path().string());
  add_done(offset, offset + length);
}

std::filesystem::path partial_blob::commit() {
  std::lock_guard lock(mutex_);
  if (finished_) throw std::logic_error("commit of a finished partial blob " + digest_);
  const auto part = part_path();
  std::string actual;
  try {
    std::lock_guard hashing(write_mutex_);
    sha256_file_update(*hashed_digest_, part, hashed_);
    actual = hashed_digest_->finish();
  } catch (...) {
    finished_ = true;
    close_files();
    throw;
  }
  finished_ = true;
  if (actual != digest_) {
    ::unlink(part.c_str());
    ::unlink(ranges_path().c_str());
    close_files();
    throw digest_mismatch(digest_, actual);
  }
  const auto blob = blobs_dir_ / ("sha256-" + std::string(sha256_digest_hex(digest_)));
  if (::fsync(part_fd_) != 0 || ::fchmod(part_fd_, 0444) != 0) {
    int e = errno;
    close_files();
    throw_errno(e, "finishing " + part.string());
  }
  // Renamed while still locked: no second writer can open the .part in between.
  if (::rename(part.c_str(), blob.c_str()) != 0) {
    int e = errno;
    close_files();
    throw_errno(e, "renaming " + part.string() + " to " + blob.string());
  }
  fsync_dir(blobs_dir_);
  ::unlink(ranges_path().c_str());
  close_files();
  return blob;
}

void partial_blob::discard() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  ::unlink(part_path().c_str());
  ::unlink(ranges_path().c_str());
  close_files();
}

}  // namespace hearth::store
