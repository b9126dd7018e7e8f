// One broker per database: an exclusive flock(2) on DB.lock beside the database, held for the
// life of the job store. The file holds the holder's pid as text, so the second broker can say
// whose database it is. A lock file left by a dead broker is harmless: the kernel drops the lock
// with the process, and the next broker takes it and writes its own pid.
#pragma once

#include <string>

#include "common/result.h"

namespace hearth::broker {

class store_lock {
 public:
  // Takes the lock on `db_path` + ".lock" without waiting. Fails naming the holder's pid when
  // another store (in this process or another) holds it.
  static result<store_lock> take(const std::string& db_path);

  store_lock(store_lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  store_lock& operator=(store_lock&& o) noexcept;
  store_lock(const store_lock&) = delete;
  store_lock& operator=(const store_lock&) = delete;
  ~store_lock();

 private:
  explicit store_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace hearth::broker
