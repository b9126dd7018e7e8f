#include "broker/store-lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

namespace hearth::broker {
namespace {

// The files this process's stores lock, by device and inode. A second store of the same file in
// this process must not even open it: closing that descriptor would drop the first store's
// SQLite locks.
struct held_files {
  std::mutex mu;
  std::set<std::pair<dev_t, ino_t>> files;
};
held_files& locked_files() {
  static held_files h;
  return h;
}

// The pid holding a flock on inode `ino`, from /proc/locks ("1: FLOCK ADVISORY WRITE 4242
// fe:00:10952811 0 EOF"), or "" when it cannot be told. Only the inode is matched: the device
// there is the file system's own, which under overlayfs is not the one stat() reports.
std::string flock_holder(ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  const std::string want = ":" + std::to_string(ino);
  while (std::getline(locks, line)) {
    if (line.find("->") != std::string::npos) continue;  // a waiter, not a holder
    std::istringstream in(line);
    std::string n, type, mode, access, pid, file;
    if (!(in >> n >> type >> mode >> access >> pid >> file) || type != "FLOCK") continue;
    if (file.size() > want.size() && file.ends_with(want)) return pid;
  }
  return "";
}

std::string in_use_message(const std::string& db_path, const std::string& pid) {
  return db_path + " is in use by another broker (pid " + (pid.empty() ? "unknown" : pid) +
         "); one broker per database";
}

}  // namespace

result<store_lock> store_lock::take(const std::string& db_path) {
  held_files& h = locked_files();
  std::lock_guard guard(h.mu);
  struct stat st {};
  if (::stat(db_path.c_str(), &st) == 0 && h.files.contains({st.st_dev, st.st_ino})) {
    return error{in_use_message(db_path, std::to_string(getpid()))};
  }
  // O_CLOEXEC: a program the broker starts must not inherit (and keep) the lock.
  const int fd = ::open(db_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return error{db_path + ": cannot open the database: " + std::strerror(errno)};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return error{db_path + ": cannot read the database's file status: " + std::strerror(e)};
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e != EWOULDBLOCK) return error{db_path + ": cannot lock: " + std::strerror(e)};
    return error{in_use_message(db_path, flock_holder(st.st_ino))};
  }
  h.files.insert({st.st_dev, st.st_ino});
  return store_lock(fd, st.st_dev, st.st_ino);
}

store_lock::store_lock(store_lock&& o) noexcept : fd_(o.fd_), dev_(o.dev_), ino_(o.ino_) {
  o.fd_ = -1;
}

store_lock& store_lock::operator=(store_lock&& o) noexcept {
  std::swap(fd_, o.fd_);
  std::swap(dev_, o.dev_);
  std::swap(ino_, o.ino_);
  return *this;
}

// Closing the descriptor releases the lock. Nothing is left beside the database (brokers before
// this one locked a DB.lock file; one left behind is never read and may be removed).
store_lock::~store_lock() {
  if (fd_ < 0) return;
  held_files& h = locked_files();
  std::lock_guard guard(h.mu);
  h.files.erase({dev_, ino_});
  ::close(fd_);
}

}  // namespace hearth::broker
