#include "store/file-io.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

namespace hearth::store {

void throw_errno(int error, const std::string& what) {
  throw std::system_error(error, std::generic_category(), what);
}

void fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "opening folder " + dir.string());
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) throw_errno(e, "fsync of folder " + dir.string());
}

void write_file_atomic(const std::filesystem::path& file, std::string_view bytes) {
  // Unique per process and call: two writers of one file never share a temporary.
  static std::atomic<uint64_t> counter{0};
  auto tmp = file;
  tmp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno(errno, "creating " + tmp.string());
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw_errno(e, "writing " + tmp.string());
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw_errno(e, "fsync of " + tmp.string());
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(e, "renaming " + tmp.string() + " to " + file.string());
  }
  fsync_dir(file.parent_path());
}

bool read_small_file(const std::filesystem::path& file, size_t max_bytes, std::string& out) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    return false;
  }
  out.assign(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  ::close(fd);
  out.resize(done);
  return true;
}

file_lock::file_lock(const std::filesystem::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno(errno, "opening lock " + file.string());
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    ::close(fd_);
    throw_errno(e, "locking " + file.string());
  }
}

file_lock::~file_lock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hearth::store
