// The digests of a plain models directory's files (`--models DIR`), which the store does not own:
// (path, size, mtime) -> digest, kept in STORE/digests.json so that a file is hashed once, not at
// every start; a file whose size or modification time changed is hashed again. Files are keyed by
// their absolute path. Thread-safe: the
// catalog's watch thread hashes while the transfer server looks files up by digest.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace hearth::store {

class digest_cache {
 public:
  // Loads `file` (STORE/digests.json) when it is there; a file that does not decode counts as
  // empty (every file is hashed again).
  explicit digest_cache(std::filesystem::path file);

  // The digest of `file` when known for its current size and modification time.
  std::optional<std::string> known(const std::filesystem::path& file) const;
  // The digest of `file`, hashing it when not known; nullopt when it cannot be read, or when
  // `cancel` became true while hashing (read between 4 MiB blocks). A file that changed while
  // it was hashed is hashed, but not remembered.
  std::optional<std::string> digest(const std::filesystem::path& file,
                                    const std::atomic<bool>* cancel = nullptr);
  // A file with that digest whose size and time are still those it was hashed at, else nullopt.
  std::optional<std::filesystem::path> path_of(std::string_view digest) const;
  // Forgets every file not in `paths` (deleted files, so the cache does not grow forever).
  void retain(const std::set<std::string>& paths);
  // Writes the cache when it changed since it was loaded or saved (atomically).
  void save();

  // How many files this object hashed (the tests' proof that a file is hashed once).
  uint64_t hashed() const { return hashed_; }

 private:
  struct entry {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string digest;
  };

  const std::filesystem::path file_;
  mutable std::mutex mu_;
  std::map<std::string, entry> entries_;  // by path
  bool dirty_ = false;
  std::atomic<uint64_t> hashed_{0};
};

}  // namespace hearth::store
