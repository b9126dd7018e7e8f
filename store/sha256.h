// SHA-256 digests as the store and the wire spell them: "sha256:" + 64 lower-case hex digits
// (schema/PROTOCOL.md). Streaming, through OpenSSL's EVP interface, so a 40 GB model is hashed in
// constant memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace hearth::store {

inline constexpr std::string_view sha256_prefix = "sha256:";

// A running SHA-256: update() with the bytes in order, then finish() once.
class sha256 {
 public:
  sha256();
  ~sha256();
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;

  void update(const void* data, size_t n);
  // "sha256:<hex>"; the object may not be updated afterwards.
  std::string finish();

 private:
  struct context;
  std::unique_ptr<context> ctx_;
};

// The digest of a byte string.
std::string sha256_bytes(std::string_view bytes);

// The digest of a whole file, read in large blocks. Throws std::system_error (naming the file)
// when it cannot be opened or read.
std::string sha256_file(const std::filesystem::path& file);

// Adds the bytes of `file` from `offset` to its end to `h` (a digest begun on the bytes before
// `offset`); throws as sha256_file.
void sha256_file_update(sha256& h, const std::filesystem::path& file, uint64_t offset);

// Whether `digest` is "sha256:" + 64 lower-case hex digits: the only form a digest from the
// network or a file may take before it becomes part of a path.
bool sha256_digest_valid(std::string_view digest);

// The 64 hex digits of a valid digest (its "sha256:" removed).
std::string_view sha256_digest_hex(std::string_view digest);

}  // namespace hearth::store
