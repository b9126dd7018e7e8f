// The store's errors that callers act on (../shared/STYLE.md 9c): each carries the numbers or
// digests it concerns, so a node can report them on the wire without parsing a message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace hearth::store {

// A blob's bytes did not hash to the digest they were fetched or imported as. The partial blob
// is gone when this is thrown: a retry starts from nothing.
struct digest_mismatch : std::runtime_error {
  digest_mismatch(std::string expected_digest, std::string actual_digest)
      : std::runtime_error("digest mismatch: expected " + expected_digest + ", got " +
                           actual_digest),
        expected(std::move(expected_digest)),
        actual(std::move(actual_digest)) {}
  std::string expected, actual;
};

// Not enough room for a blob: `needed` more bytes, `available` free (the disk's free space, or
// what the store's size limit still allows, whichever is smaller).
struct no_space : std::runtime_error {
  no_space(uint64_t needed_bytes, uint64_t available_bytes)
      : std::runtime_error("no space in the model store: " + std::to_string(needed_bytes) +
                           " bytes needed, " + std::to_string(available_bytes) + " available"),
        needed(needed_bytes),
        available(available_bytes) {}
  uint64_t needed, available;
};

// Another writer (this process or another) has the same partial blob open.
struct blob_busy : std::runtime_error {
  explicit blob_busy(std::string blob_digest)
      : std::runtime_error("blob " + blob_digest + " is being written by another writer"),
        digest(std::move(blob_digest)) {}
  std::string digest;
};

// A manifest that cannot be stored: a bad name, a path that leaves the model's folder, a file
// whose blob is not in the store, a digest that does not match its files.
struct bad_manifest : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace hearth::store
