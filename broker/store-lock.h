// One broker per database: an exclusive flock(2) on the database file itself, held for the life
// of the job store. The lock is on the file, not on its name: a second broker that reaches the
// same file through a symlink or a hard link (whose WAL, named after the link, would be another
// file) is refused too. The holder's pid, for the message, is read from /proc/locks.
//
// flock and SQLite's own locks (fcntl, POSIX) do not interact on a local file system. POSIX locks
// have one catch: closing any descriptor of the file drops all the process's locks on it. So the
// lock's descriptor is closed only after the store's connections are (job-store.cpp), and a
// second store in the same process is refused without opening the file at all.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace hearth::broker {

class store_lock {
 public:
  // Takes the lock on the file at `db_path` (created empty when missing, as SQLite would) without
  // waiting. Fails naming the holder's pid when another store (in this process or another)
  // holds it.
  static result<store_lock> take(const std::string& db_path);

  store_lock(store_lock&& o) noexcept;
  store_lock& operator=(store_lock&& o) noexcept;
  store_lock(const store_lock&) = delete;
  store_lock& operator=(const store_lock&) = delete;
  ~store_lock();

 private:
  store_lock(int fd, dev_t dev, ino_t ino) : fd_(fd), dev_(dev), ino_(ino) {}
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace hearth::broker
