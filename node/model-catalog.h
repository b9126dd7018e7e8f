// The models a node serves: every *.gguf file directly in its models directory and every
// Hugging Face model directory there (a folder with config.json), described from metadata alone
// (a GGUF header is mapped, safetensors weights are never opened). A file that does
// not parse is left out and reported, so one bad download does not take the node down.
// The directory is rescanned periodically (model_catalog_watch): files added, changed or removed
// are seen without a restart, and only those are read again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/model-file.h"
#include "schema/messages.h"

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
};

class model_catalog {
 public:
  // Reads every *.gguf file and model folder of `dir` (not recursive). Throws std::runtime_error
  // naming the directory when it is missing or cannot be listed; bad files go to errors() instead.
  // With `previous` (an earlier scan of the same directory), files whose size and modification
  // time are unchanged are not read again.
  static model_catalog scan(const std::string& dir, const model_catalog* previous = nullptr);

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
  // Same models (name, description, file) and same skipped files as `other`.
  bool same_as(const model_catalog& other) const;

  static constexpr size_t k_max_skipped_advertised = 64;
  static constexpr size_t k_max_skipped_error_bytes = 300;

 private:
  std::string dir_;
  std::vector<model_catalog_entry> entries_;
  std::vector<model_catalog_error> errors_;
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
  ~model_catalog_watch();
  model_catalog_watch(const model_catalog_watch&) = delete;
  model_catalog_watch& operator=(const model_catalog_watch&) = delete;

  std::shared_ptr<const model_catalog> get() const;
  // Scans now (also what the watcher's thread does); true when the catalog changed. A directory
  // that cannot be read keeps the last catalog (logged once until it can be read again).
  bool rescan();

 private:
  void run();

  const std::string dir_;
  const std::chrono::milliseconds period_;
  const std::function<void()> changed_;
  mutable std::mutex mu_;
  std::shared_ptr<const model_catalog> catalog_;
  bool unreadable_logged_ = false;
  std::condition_variable cv_;
  bool stop_ = false;
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
