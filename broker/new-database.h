// A database file that a start of the broker creates is removed again when the broker never
// served: a failed start (a mistyped --bind, an address in use, a bad key folder) leaves nothing
// behind. Declared before the job store it guards, so that it is destroyed after the store has
// closed the file and let go of its lock.
#pragma once

#include <string>

namespace hearth::broker {

class new_database {
 public:
  // Notes whether `path` exists now, before the store opens (and maybe creates) it.
  explicit new_database(std::string path);
  // Removes the file, its WAL, shared memory, journal and lock file when it did not exist before
  // and keep() was not called.
  ~new_database();
  new_database(const new_database&) = delete;
  new_database& operator=(const new_database&) = delete;

  // The broker served: the file is the broker's database now, whatever happens next.
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool existed_ = true;
  bool keep_ = false;
};

}  // namespace hearth::broker
