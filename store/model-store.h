// The content-addressed model store (README.md): verified blobs by digest, manifests naming
// models made of them, a view of symlinks the node's catalog scans, a size limit kept by evicting
// the least recently used models. Everything on disk is written so that a kill at any point
// leaves either no model or a whole verified one.
//
// Several processes may use one store at once (the node, `hearth pull`): changes to manifests and
// views hold an flock on STORE/lock, a partial blob an flock on its .part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "store/manifest.h"
#include "store/partial-blob.h"
#include "store/sha256.h"
#include "store/store-error.h"

namespace hearth::store {

// The store's folder when no setting names one: $HEARTH_STORE, else $XDG_DATA_HOME/hearth/store,
// else ~/.local/share/hearth/store.
std::filesystem::path default_store_root();

class model_store {
 public:
  // Opens the store at `root` (made when missing), with at most `limit_bytes` of blobs and
  // partial blobs (0: no limit but the disk). Views without a manifest (a remove that was killed)
  // are removed, manifests without a view (a put that was killed) get theirs. Throws
  // std::system_error when the folders cannot be made.
  explicit model_store(std::filesystem::path root, uint64_t limit_bytes = 0);

  const std::filesystem::path& root() const { return root_; }
  uint64_t limit() const { return limit_; }

  // Blobs. Digests are "sha256:<hex>"; an invalid one is never found (and never a path).
  bool has_blob(std::string_view digest) const;
  std::filesystem::path blob_path(std::string_view digest) const;

  // A writer for a blob not in the store yet: a previous .part of the same size is resumed.
  // Throws no_space (with the numbers) when capacity() is less than what remains to be written,
  // blob_busy when another writer has it, std::invalid_argument for an invalid digest.
  std::unique_ptr<partial_blob> open_partial(std::string_view digest, uint64_t size);

  // What the store may still take: the disk's free space, and limit - used when there is a limit.
  uint64_t capacity() const;
  // The bytes of blobs and partial blobs.
  uint64_t used() const;

  // A file already on disk into blobs/ without a second copy where the filesystem allows it:
  // a hard link, else a reflink (FICLONE), else a copy. The result is hashed; `digest` "" takes
  // what it hashes to, else a different hash throws digest_mismatch. Returns the blob's path.
  // (A hard-linked blob is the source file's inode: README.md says what that means.)
  std::filesystem::path import_file(const std::filesystem::path& src, std::string_view digest = "");

  // Stores a manifest (replacing one of the same name) and its view under models/. Its files'
  // blobs must be in the store; an empty digest is computed, a wrong one refused; created_ms 0
  // becomes now. Throws bad_manifest.
  void put_manifest(const manifest& m);
  // The model of that name, or the first (by name) with that alias.
  std::optional<manifest> find(std::string_view name_or_alias) const;
  // Every readable manifest, by name (a manifest file that does not decode is skipped).
  std::vector<manifest> list() const;
  // Removes the manifest, its view, and its blobs that no other manifest uses. False when there
  // is no such model.
  bool remove(std::string_view name);
  // last_used_ms = now (or `now_ms`): what eviction orders by.
  void touch(std::string_view name, int64_t now_ms = 0);
  // Evicts least-recently-used models, never a pinned one nor one named in `in_use`, until
  // capacity() >= need or nothing more may go. Returns the names evicted, in order.
  std::vector<std::string> make_room(uint64_t need, const std::set<std::string>& in_use);

  // STORE/models: the folder of symlinks the node's catalog scans (models/<name>.gguf for a
  // one-file GGUF, models/<name>/<path> for the others).
  std::filesystem::path views() const { return root_ / "models"; }
  std::filesystem::path manifest_path(std::string_view name) const;

 private:
  void reconcile_views();
  void write_view(const manifest& m) const;
  void remove_view(std::string_view name) const;
  bool remove_locked(std::string_view name);
  std::optional<manifest> read_manifest(const std::filesystem::path& file) const;

  std::filesystem::path root_;
  uint64_t limit_;
};

}  // namespace hearth::store
