// The few POSIX file operations the store's crash safety rests on, each throwing
// std::system_error that names the file: a file written whole or not at all (tmp, fsync, rename,
// fsync of the folder), a folder's entries made durable, an flock held for a scope.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace hearth::store {

[[noreturn]] void throw_errno(int error, const std::string& what);

// fsync of a folder: a rename or unlink in it survives a power cut.
void fsync_dir(const std::filesystem::path& dir);

// Writes `bytes` to `file` through a temporary file in the same folder: fsync'd, renamed over
// `file`, the folder fsync'd. A reader sees the old bytes or the new, never a part.
void write_file_atomic(const std::filesystem::path& file, std::string_view bytes);

// Reads the whole of a small regular file (at most `max_bytes`) into `out`; false when it is
// missing, unreadable, not a regular file or larger (its bytes are untrusted either way).
bool read_small_file(const std::filesystem::path& file, size_t max_bytes, std::string& out);

// An exclusive flock on a file (made when missing), held until destruction.
class file_lock {
 public:
  explicit file_lock(const std::filesystem::path& file);
  ~file_lock();
  file_lock(const file_lock&) = delete;
  file_lock& operator=(const file_lock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hearth::store
