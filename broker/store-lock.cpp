#include "broker/store-lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hearth::broker {
namespace {

// The pid the holder wrote, or "" (it may not have written it yet).
std::string read_holder(int fd) {
  char buf[32];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string pid;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) pid += buf[i];
  return pid;
}

}  // namespace

result<store_lock> store_lock::take(const std::string& db_path) {
  const std::string path = db_path + ".lock";
  // O_CLOEXEC: a program the broker starts must not inherit (and keep) the lock.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return error{path + ": cannot open the lock file: " + std::strerror(errno)};
  store_lock lock(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return error{path + ": cannot lock: " + std::strerror(errno)};
    std::string pid = read_holder(fd);
    return error{db_path + " is in use by another broker (pid " +
                 (pid.empty() ? std::string("unknown") : pid) + "); one broker per database"};
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return error{path + ": cannot write the pid: " + std::strerror(errno)};
  }
  return lock;
}

store_lock& store_lock::operator=(store_lock&& o) noexcept {
  std::swap(fd_, o.fd_);
  return *this;
}

// Closing the descriptor releases the lock. The file stays: removing it races with a broker that
// has just opened it, which would then lock the removed file while a third locks a new one.
store_lock::~store_lock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hearth::broker
