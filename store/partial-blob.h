// A blob being written: STORE/partial/sha256-<hex>.part, preallocated to its size, with the byte
// ranges already written and flushed journaled in STORE/partial/sha256-<hex>.ranges, so that a
// writer killed at any point resumes where its flushed data ends (README.md, "Crash safety").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/sha256.h"

namespace hearth::store {

// [offset, offset + length) of a blob.
struct byte_range {
  uint64_t offset = 0, length = 0;
  bool operator==(const byte_range&) const = default;
};

// One writer per blob (an flock on the .part: a second one, in any process, gets blob_busy).
// write() and mark_done() may be called from several threads at once (a pipelined fetch writes
// chunks as they arrive). Made by model_store::open_partial. Destroying it without commit() or
// discard() keeps the files for a later resume.
class partial_blob {
 public:
  // Opens (or creates, preallocated) the partial files of `digest` in `partial_dir`; the blob
  // goes to `blobs_dir` on commit. A previous .part of another size is started over. Throws
  // no_space when the disk cannot hold it, blob_busy, std::system_error.
  partial_blob(std::filesystem::path partial_dir, std::filesystem::path blobs_dir,
               std::string digest, uint64_t size);
  ~partial_blob();
  partial_blob(const partial_blob&) = delete;
  partial_blob& operator=(const partial_blob&) = delete;

  const std::string& digest() const { return digest_; }
  uint64_t size() const { return size_; }

  // The ranges not yet marked done, in order.
  std::vector<byte_range> missing() const;
  // The bytes marked done.
  uint64_t bytes_done() const;

  // Writes bytes at `offset` (pwrite; [offset, offset + n) must lie within the blob, else
  // std::out_of_range). They count as done only once mark_done() says so. Bytes that continue
  // the hashed prefix are hashed here (bytes_hashed()); bytes written again inside it start the
  // hash over.
  void write(uint64_t offset, const void* data, size_t n);
  // Makes [offset, offset + length) durable (fdatasync of the .part) and then records it in the
  // journal (appended, fdatasync'd): after a crash it is never fetched again, and never trusted
  // before its bytes are on disk.
  void mark_done(uint64_t offset, uint64_t length);

  // The length of the prefix [0, n) whose digest is already computed: what write() added in
  // order. commit() hashes only the rest from the file.
  uint64_t bytes_hashed() const;

  // Hashes the file (the part after bytes_hashed()); when it matches: fsync, chmod 0444, rename
  // into blobs/ (atomic), the journal removed; returns the blob's path. When it does not: the
  // partial files are deleted and digest_mismatch is thrown. The object is finished either way.
  std::filesystem::path commit();
  // Deletes the partial files.
  void discard();

  std::filesystem::path part_path() const;
  std::filesystem::path ranges_path() const;

 private:
  void open_files();
  void load_journal();
  void rewrite_journal();
  void close_files();
  void add_done(uint64_t offset, uint64_t end);

  std::filesystem::path partial_dir_, blobs_dir_;
  std::string digest_;
  uint64_t size_;
  int part_fd_ = -1, ranges_fd_ = -1;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> done_;  // offset -> end, disjoint and not touching
  uint64_t done_bytes_ = 0;
  bool finished_ = false;

  // The digest of the bytes [0, hashed_) as they are in the file, kept as write() goes: a copy
  // whose bytes arrive in order is hashed while it arrives, so its commit after the last byte
  // hashes next to nothing (it re-read the whole file: 0.45 s of a 5 s copy of 512 MiB on a
  // gigabit link). write_mutex_ covers the pwrite with the hash, so that bytes hashed are the
  // bytes the file holds whatever the threads do.
  mutable std::mutex write_mutex_;
  std::unique_ptr<sha256> hashed_digest_ = std::make_unique<sha256>();
  uint64_t hashed_ = 0;
};

}  // namespace hearth::store
