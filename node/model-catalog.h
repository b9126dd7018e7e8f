// The models a node serves: every *.gguf file directly in its models directory and every
// Hugging Face model directory there (a folder with config.json), and every model of its model
// store (store/README.md: the store's view folder, described by its manifests; a name in both is
// the models directory's), described from metadata alone
// (a GGUF header is mapped, safetensors weights are never opened). A file that does
// not parse is left out and reported, so one bad download does not take the node down.
// The directory is rescanned periodically (model_catalog_watch): files added, changed or removed
// are seen without a restart, and only those are read again. The models directory's files are
// hashed once, in the background (the store's digest cache), so that other nodes can copy them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/model-file.h"
#include "schema/messages.h"
#include "store/digest-cache.h"
#include "store/model-store.h"

namespace hearth::node {

// A file of the models directory that is not a usable GGUF model, and why.
struct model_catalog_error {
  std::string path;
  std::string error;
  uint64_t stamp = 0;  // model_file_stamp() when it was read
};

struct model_catalog_entry {
  wire::model_info info;  // loaded is always false here; engines set it
  std::string path;
  uint64_t stamp = 0;  // model_file_stamp() when it was read
  // The GGUF file as the scan opened it (its header parsed, the file mapped), for a load to use
  // instead of opening it again while the file's stamp is still `stamp`; null for a Hugging Face
  // folder (described without its weights, so its load imports them).
  std::shared_ptr<const model_file> file;
  // Every file of the model on disk, as info.files lists them (same order), once their digests
  // are known: what another node may copy.
  std::vector<std::string> file_paths;
};

// What a scan reads: the models directory, and a store's view folder with the store's manifests.
struct model_catalog_sources {
  std::string models_dir;                  // "": none
  std::string store_views;                 // model_store::views(); "": no store
  std::vector<store::manifest> manifests;  // the store's (model_store::list())
  std::set<std::string> pinned;            // pinned by the node's settings
  std::set<std::string> hidden;            // models-directory models evicted (until restart)
  // Digests of the models directory's files already known (none hashed by the scan).
  const store::digest_cache* digests = nullptr;
};

class model_catalog {
 public:
  // Reads every *.gguf file and model folder of `dir` (not recursive). Throws std::runtime_error
  // naming the directory when it is missing or cannot be listed; bad files go to errors() instead.
  // With `previous` (an earlier scan of the same directory), files whose size and modification
  // time are unchanged are not read again.
  static model_catalog scan(const std::string& dir, const model_catalog* previous = nullptr);
  // The same over the models directory (which may be "") and the store's models.
  static model_catalog scan(const model_catalog_sources& sources,
                            const model_catalog* previous = nullptr);

  // Models sorted by name.
  const std::vector<model_catalog_entry>& entries() const { return entries_; }
  // Files that were skipped, for the caller to log.
  const std::vector<model_catalog_error>& errors() const { return errors_; }
  // The model of that name, or nullptr.
  const model_catalog_entry* find(std::string_view name) const;
  // The file of the model of that name, or "" when there is none.
  std::string path_of(std::string_view name) const;
  // Every model's info, in name order.
  std::vector<wire::model_info> models() const;
  // The directory that was scanned.
  const std::string& dir() const { return dir_; }
  // Skipped files as the node advertises them (names within the directory, at most
  // k_max_skipped_advertised, errors cut to k_max_skipped_error_bytes).
  std::vector<wire::skipped_model> skipped() const;
  // Same models (name, description, file, digest, source, pinned) and same skipped files as
  // `other`.
  bool same_as(const model_catalog& other) const;
  // Files of models-directory models whose digest the scan's digest cache did not know.
  const std::vector<std::string>& unhashed() const { return unhashed_; }
  // Names of store models not served because the models directory has a model of that name.
  const std::vector<std::string>& shadowed() const { return shadowed_; }
  // A file of a served model with that digest (a store blob through its view, or a file of the
  // models directory), for another node's copy.
  std::optional<std::filesystem::path> file_by_digest(std::string_view digest) const;

  static constexpr size_t k_max_skipped_advertised = 64;
  static constexpr size_t k_max_skipped_error_bytes = 300;

 private:
  std::string dir_;
  std::vector<model_catalog_entry> entries_;
  std::vector<model_catalog_error> errors_;
  std::vector<std::string> unhashed_;
  std::vector<std::string> shadowed_;
};

// What a model_catalog_watch serves.
struct model_catalog_options {
  std::string models_dir;  // "": none (the store's models only)
  // The store's root (store::model_store): its models are served too, and the models directory's
  // files are hashed in the background into its digest cache. "": no store, nothing hashed.
  std::string store_dir;
  std::vector<std::string> pinned;  // advertised as pinned (the node never evicts them)
  std::chrono::milliseconds period{0};
};

// The catalog an engine serves, replaced whole by rescans on the watcher's own thread while
// the engine's threads read it: readers take a snapshot (get()) and keep it while they use its
// entries. Every `period` the directory is scanned again; when what the node would advertise
// changed, `changed` is called (from the watcher's thread) and the additions, changes and
// removals are logged. A period of zero scans once, at construction.
class model_catalog_watch {
 public:
  // Scans `dir` (throws as model_catalog::scan does) and logs the files it skips.
  model_catalog_watch(const std::string& dir, std::chrono::milliseconds period,
                      std::function<void()> changed);
  // The same with a store (options.store_dir): its models served, the models directory's files
  // hashed on the watcher's thread (`changed` once their digests are known). The thread runs
  // when there is a period or a store.
  model_catalog_watch(model_catalog_options options, std::function<void()> changed);
  ~model_catalog_watch();
  model_catalog_watch(const model_catalog_watch&) = delete;
  model_catalog_watch& operator=(const model_catalog_watch&) = delete;

  std::shared_ptr<const model_catalog> get() const;
  // Scans now (also what the watcher's thread does); true when the catalog changed. A directory
  // that cannot be read keeps the last catalog (logged once until it can be read again).
  bool rescan();
  // Stops serving a model of the models directory until restart (model_evict of a "local"
  // model: its file is the user's, never deleted); false when no such model is served.
  bool hide(std::string_view name);
  // A store model was used (a job started on it): last in line for eviction.
  void touch(std::string_view name);
  // catalog::file_by_digest of the current catalog.
  std::optional<std::filesystem::path> file_by_digest(std::string_view digest) const;

 private:
  void run();
  model_catalog_sources sources() const;
  // Hashes the current catalog's unhashed files (stops when the watch stops); true when some
  // digest became known.
  bool hash_pending();

  const model_catalog_options options_;
  const std::function<void()> changed_;
  std::unique_ptr<store::model_store> store_;  // null without a store
  std::unique_ptr<store::digest_cache> digests_;
  mutable std::mutex mu_;
  std::shared_ptr<const model_catalog> catalog_;
  std::set<std::string> hidden_;
  std::set<std::string> shadowed_logged_;
  bool unreadable_logged_ = false;
  std::condition_variable cv_;
  bool stop_ = false;
  bool kick_ = false;  // a rescan may have found files to hash
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// A model file (through links) by its size and modification time, a Hugging Face folder by those
// of every file in it: what changes when the file is replaced, rewritten or truncated. 0 when it
// cannot be read.
uint64_t model_file_stamp(const std::filesystem::path& p);

// The file (or Hugging Face folder) a loaded model was read from, to tell how it changed under
// the model. A file is held open, so that modified() compares the open file's own size and time
// (one fstat: the file that is mapped, rewritten or truncated in place) and replaced() the path's
// (another file renamed into its place, or none: the mapped one is intact). A folder's stamp
// stands for both.
class model_file_watch {
 public:
  explicit model_file_watch(const std::string& path);
  ~model_file_watch();
  model_file_watch(const model_file_watch&) = delete;
  model_file_watch& operator=(const model_file_watch&) = delete;

  bool modified() const;
  bool replaced() const;
  // model_file_stamp() of the file held open when the watch began (0 for a folder).
  uint64_t open_stamp() const { return open_stamp_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t open_stamp_ = 0;  // of fd_
  uint64_t path_stamp_ = 0;  // model_file_stamp(path_)
};

// A model's description from its handle (engine/model-file.h, opened without a Hugging Face
// directory's weights, as model_catalog::scan opens it); an error naming the file when its file
// type cannot be read.
result<wire::model_info> model_info_read(const model_file& f);

// The name of a llama.cpp file type (general.file_type; engine/io/tensor-type.h llama_ftype_name)
// as models are listed: "Q4_K_M", "ftype 99".
std::string model_file_type_name(uint64_t ftype);

}  // namespace hearth::node
