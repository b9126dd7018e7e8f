#include "node/model-catalog.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <system_error>

#include "engine/io/gguf-split.h"
#include "engine/io/tensor-type.h"
#include "engine/model-file.h"
#include "engine/tokenizer/chat-template.h"

namespace hearth::node {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string model_file_type_name(uint64_t ftype) {
  const auto name = llama_ftype_name(ftype);
  return name ? upper(*name) : "ftype " + std::to_string(ftype);
}

result<wire::model_info> model_info_read(const model_file& f) {
  const std::string& path = f.path;
  wire::model_info info;
  // split GGUF (E): a folder (a Hugging Face model, or a store's view of a split model) by its
  // name, a GGUF file by its stem, a split's first part without "-00001-of-0000N".
  std::error_code dir_ec;
  info.name = std::filesystem::is_directory(path, dir_ec)
                  ? std::filesystem::path(path).filename().string()
                  : gguf_model_name(path);
  info.architecture = f.hparams.arch;
  auto ftype = f.gguf.get_uint("general.file_type");
  if (!ftype) return error{path + ": " + ftype.message()};
  // Files written without general.file_type (converters, our own writer) are named after the
  // type holding most of their bytes.
  info.quantization = *ftype ? model_file_type_name(**ftype) : upper(f.dominant_type());
  info.size_bytes = f.size_bytes;
  info.context_length = uint32_t(std::max(f.hparams.n_ctx_train, 0));
  if (auto choice = chat_template_for_model(f.gguf, ""))
    info.chat_template = std::string(chat_template_name(choice->tmpl));
  const model_weights_count count = model_weights_counted(f.gguf, f.hparams);
  info.params_total = count.params_total;
  info.params_active = count.params_active;
  // What a pipeline split weighs (PROTOCOL.md 17): the planner's input.
  const model_layer_bytes lb = model_layer_bytes_of(f.gguf, f.hparams);
  info.layout.layer_bytes = lb.layers;
  info.layout.input_bytes = lb.input;
  info.layout.output_bytes = lb.output;
  info.layout.shared_bytes = lb.shared;
  // F16 keys and values (engine/kv-cache.h).
  info.layout.kv_bytes_per_token =
      uint64_t(std::max(f.hparams.n_head_kv, 0)) *
      uint64_t(std::max(f.hparams.head_dim_k, 0) + std::max(f.hparams.head_dim_v, 0)) * 2;
  return info;
}

namespace {

namespace fs = std::filesystem;

uint64_t stamp_mix(uint64_t h, uint64_t v) {
  return (h ^ v) * 0x100000001b3ull;  // FNV-1a's prime, a word at a time
}

// A regular file (through links) by its size and modification time, from one stat() (the batch
// engine takes a model's after every step); 0 for anything else.
uint64_t stamp_of_stat(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return 0;
  const uint64_t mtime_ns =
      uint64_t(st.st_mtim.tv_sec) * 1000000000ull + uint64_t(st.st_mtim.tv_nsec);
  return stamp_mix(stamp_mix(0xcbf29ce484222325ull, uint64_t(st.st_size)), mtime_ns);
}

uint64_t stamp_of_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? stamp_of_stat(st) : 0;
}

}  // namespace

// A file (through links) by its size and modification time; a Hugging Face folder by those of
// every file in it, so a shard still being copied counts as a change.
uint64_t model_file_stamp(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) {
    // split GGUF (E): a split's first part stands for every part (a part replaced, rewritten or
    // still being copied is a change to the model).
    const auto parts = gguf_model_paths(p.string());
    if (parts.size() == 1) return stamp_of_stat(st);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const auto& part : parts) h = stamp_mix(h, stamp_of_file(part));
    return h;
  }
  std::error_code ec;
  uint64_t h = 0xcbf29ce484222325ull;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    h = stamp_mix(h, std::hash<std::string>{}(it->path().filename().string()));
    h = stamp_mix(h, stamp_of_file(it->path()));
  }
  return h;
}

model_file_watch::model_file_watch(const std::string& path)
    : path_(path), path_stamp_(model_file_stamp(path)) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0) open_stamp_ = stamp_of_stat(st);
}

model_file_watch::~model_file_watch() {
  if (fd_ >= 0) ::close(fd_);
}

bool model_file_watch::modified() const {
  if (fd_ < 0) return replaced();
  struct stat st {};
  return ::fstat(fd_, &st) != 0 || stamp_of_stat(st) != open_stamp_;
}

bool model_file_watch::replaced() const {
  return model_file_stamp(path_) != path_stamp_;
}

namespace {

// The model candidates of a folder: *.gguf files (a split's first part) and model folders;
// dangling links go to `errors`. `skip_hidden`: names starting with '.' are passed over (a
// store's view being made). Throws std::runtime_error naming the folder when it cannot be listed.
std::vector<fs::path> catalog_candidates(const std::string& dir,
                                         std::vector<model_catalog_error>& errors,
                                         bool skip_hidden) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::runtime_error("cannot read the models directory " + dir + ": " + ec.message());
  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (skip_hidden && it->path().filename().string().starts_with(".")) continue;
    // Symlinks count by their target, so a models folder of links into a download cache works;
    // one whose target is gone is reported, not passed over.
    std::error_code type_ec;
    if (it->is_symlink(type_ec) && !fs::exists(it->path(), type_ec)) {
      const fs::path target = fs::read_symlink(it->path(), type_ec);
      errors.push_back({it->path().string(),
                        "dangling symbolic link to " + target.string() + " (no such file)", 0});
      continue;
    }
    // split GGUF (E): a split model is listed once, by its first part (or by the folder that
    // holds its parts: a store's view); its other parts are neither models nor skipped files.
    const bool gguf = it->path().extension() == ".gguf" && it->is_regular_file(type_ec) &&
                      !gguf_split_is_later_part(it->path().string());
    const bool hf_dir =
        it->is_directory(type_ec) && (fs::exists(it->path() / "config.json", type_ec) ||
                                      gguf_split_first_part_in(it->path().string()));
    if (gguf || hf_dir) files.push_back(it->path());
  }
  if (ec) throw std::runtime_error("cannot read the models directory " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

// The files of a models-directory model as the wire lists them (path inside the model) with their
// paths on disk: a GGUF file, a split's parts, or a folder's files (not its hidden ones, such as a
// Hugging Face download's .cache). Empty when there are more than a model may have.
std::vector<std::pair<std::string, std::string>> catalog_local_files(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    for (const auto& part : gguf_model_paths(path))
      out.emplace_back(fs::path(part).filename().string(), part);
    return out;
  }
  fs::recursive_directory_iterator it(path, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    out.emplace_back(fs::relative(it->path(), path).string(), it->path().string());
    if (out.size() > wire::max_model_files) return {};
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A models-directory model's files and digest from the digest cache; the files it does not know
// yet go to `unhashed`.
void catalog_fill_local_digests(model_catalog_entry& e, const store::digest_cache* digests,
                                std::vector<std::string>& unhashed) {
  e.info.source = "local";
  e.info.files.clear();
  e.info.digest.clear();
  e.file_paths.clear();
  if (!digests) return;
  std::vector<wire::model_file> files;
  std::vector<std::string> paths;
  bool all_known = true;
  for (const auto& [rel, abs] : catalog_local_files(e.path)) {
    auto d = digests->known(abs);
    if (!d) {
      unhashed.push_back(abs);
      all_known = false;
      continue;
    }
    std::error_code ec;
    files.push_back({rel, *d, uint64_t(fs::file_size(abs, ec))});
    paths.push_back(abs);
  }
  if (!all_known || files.empty()) return;
  std::vector<store::store_file> for_digest;
  for (const auto& f : files) for_digest.push_back({f.path, f.digest, f.size});
  e.info.digest = store::model_digest(for_digest);
  e.info.files = std::move(files);
  e.file_paths = std::move(paths);
}

}  // namespace

model_catalog model_catalog::scan(const std::string& dir, const model_catalog* previous) {
  model_catalog_sources sources;
  sources.models_dir = dir;
  return scan(sources, previous);
}

model_catalog model_catalog::scan(const model_catalog_sources& src, const model_catalog* previous) {
  model_catalog cat;
  cat.dir_ = src.models_dir;
  std::vector<fs::path> files;
  if (!src.models_dir.empty()) files = catalog_candidates(src.models_dir, cat.errors_, false);
  const size_t n_local = files.size();
  if (!src.store_views.empty()) {
    // The store's view is the store's own: a folder that cannot be read (a store being made)
    // has no models yet.
    try {
      auto stored = catalog_candidates(src.store_views, cat.errors_, true);
      files.insert(files.end(), stored.begin(), stored.end());
    } catch (const std::runtime_error&) {
    }
  }
  // What the previous scan read, by path and stamp.
  std::map<std::string, const model_catalog_entry*> seen_entries;
  std::map<std::string, const model_catalog_error*> seen_errors;
  if (previous) {
    for (const auto& e : previous->entries_) seen_entries[e.path] = &e;
    for (const auto& e : previous->errors_) seen_errors[e.path] = &e;
  }
  std::map<std::string_view, const store::manifest*> manifests;
  for (const auto& m : src.manifests) manifests[m.name] = &m;
  std::set<std::string> local_names;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path& p = files[i];
    const bool local = i < n_local;
    const std::string path = p.string();
    const uint64_t stamp = model_file_stamp(p);
    std::optional<model_catalog_entry> entry;
    if (auto e = seen_entries.find(path);
        stamp != 0 && e != seen_entries.end() && e->second->stamp == stamp) {
      entry = *e->second;
    } else if (auto err = seen_errors.find(path);
               stamp != 0 && err != seen_errors.end() && err->second->stamp == stamp) {
      cat.errors_.push_back(*err->second);
      continue;
    } else {
      // A Hugging Face directory's weights are not opened: its description comes from
      // config.json and the tokenizer, its size from its safetensors files.
      auto f = model_file::open(path, {.weights = false});
      if (!f) {
        cat.errors_.push_back({path, f.message(), stamp});
        continue;
      }
      auto info = model_info_read(*f);
      if (!info) {
        cat.errors_.push_back({path, info.message(), stamp});
        continue;
      }
      std::shared_ptr<const model_file> handle;
      if (!f->hf_dir) handle = std::make_shared<const model_file>(std::move(f).value());
      entry = model_catalog_entry{std::move(info).value(), path, stamp, std::move(handle), {}};
    }
    const std::string name = entry->info.name;
    if (local) {
      if (src.hidden.count(name)) continue;
      local_names.insert(name);
      catalog_fill_local_digests(*entry, src.digests, cat.unhashed_);
      entry->info.pinned = src.pinned.count(name) > 0;
    } else {
      // A view without its manifest is a store model being removed (or put): not served.
      auto m = manifests.find(name);
      if (m == manifests.end()) continue;
      if (local_names.count(name)) {
        cat.shadowed_.push_back(name);
        continue;
      }
      entry->info.source = m->second->source;
      entry->info.digest = m->second->digest;
      entry->info.pinned = m->second->pinned || src.pinned.count(name) > 0;
      entry->info.files.clear();
      entry->file_paths.clear();
      const fs::path view_dir = m->second->kind == store::manifest_kind_gguf ? fs::path() : p;
      for (const auto& f : m->second->files) {
        entry->info.files.push_back({f.path, f.digest, f.size});
        entry->file_paths.push_back((view_dir.empty() ? p : view_dir / f.path).string());
      }
    }
    cat.entries_.push_back(std::move(*entry));
  }
  std::sort(cat.entries_.begin(), cat.entries_.end(),
            [](const auto& a, const auto& b) { return a.info.name < b.info.name; });
  std::sort(cat.errors_.begin(), cat.errors_.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  return cat;
}

std::optional<fs::path> model_catalog::file_by_digest(std::string_view digest) const {
  for (const auto& e : entries_)
    for (size_t i = 0; i < e.info.files.size() && i < e.file_paths.size(); ++i)
      if (e.info.files[i].digest == digest) return fs::path(e.file_paths[i]);
  return std::nullopt;
}

std::vector<wire::skipped_model> model_catalog::skipped() const {
  std::vector<wire::skipped_model> out;
  for (const auto& e : errors_) {
    if (out.size() == k_max_skipped_advertised) break;
    std::string why = e.error;
    if (why.size() > k_max_skipped_error_bytes) {
      // Cut at a character boundary, not inside a UTF-8 sequence.
      size_t n = k_max_skipped_error_bytes;
      while (n > 0 && (static_cast<unsigned char>(why[n]) & 0xC0) == 0x80) --n;
      why = why.substr(0, n) + "...";
    }
    out.push_back({fs::path(e.path).filename().string(), std::move(why)});
  }
  return out;
}

bool model_catalog::same_as(const model_catalog& other) const {
  auto same_entry = [](const model_catalog_entry& a, const model_catalog_entry& b) {
    return a.path == b.path && a.stamp == b.stamp && a.info.name == b.info.name &&
           a.info.digest == b.info.digest && a.info.source == b.info.source &&
           a.info.pinned == b.info.pinned;
  };
  auto same_error = [](const model_catalog_error& a, const model_catalog_error& b) {
    return a.path == b.path && a.error == b.error;
  };
  return std::equal(entries_.begin(), entries_.end(), other.entries_.begin(), other.entries_.end(),
                    same_entry) &&
         std::equal(errors_.begin(), errors_.end(), other.errors_.begin(), other.errors_.end(),
                    same_error);
}

model_catalog_watch::model_catalog_watch(const std::string& dir, std::chrono::milliseconds period,
                                         std::function<void()> changed)
    : model_catalog_watch(model_catalog_options{dir, "", {}, period}, std::move(changed)) {}

model_catalog_watch::model_catalog_watch(model_catalog_options options,
                                         std::function<void()> changed)
    : options_(std::move(options)), changed_(std::move(changed)) {
  if (!options_.store_dir.empty()) {
    store_ = std::make_unique<store::model_store>(options_.store_dir);
    digests_ = std::make_unique<store::digest_cache>(store_->root() / "digests.json");
  }
  catalog_ = std::make_shared<const model_catalog>(model_catalog::scan(sources()));
  for (const auto& e : catalog_->errors()) spdlog::warn("skipping model {}: {}", e.path, e.error);
  for (const auto& name : catalog_->shadowed()) {
    spdlog::info("store model {} is not served: the models directory has a model of that name",
                 name);
    shadowed_logged_.insert(name);
  }
  if (options_.period.count() > 0 || store_) thread_ = std::thread([this] { run(); });
}

model_catalog_watch::~model_catalog_watch() {
  stopping_ = true;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

model_catalog_sources model_catalog_watch::sources() const {
  model_catalog_sources src;
  src.models_dir = options_.models_dir;
  src.pinned.insert(options_.pinned.begin(), options_.pinned.end());
  if (store_) {
    src.store_views = store_->views().string();
    src.manifests = store_->list();
    src.digests = digests_.get();
  }
  std::lock_guard lk(mu_);
  src.hidden = hidden_;
  return src;
}

bool model_catalog_watch::hash_pending() {
  if (!digests_) return false;
  const std::shared_ptr<const model_catalog> cat = get();
  if (cat->unhashed().empty()) return false;
  uint64_t bytes = 0;
  for (const auto& f : cat->unhashed()) {
    std::error_code ec;
    const auto n = fs::file_size(f, ec);
    if (!ec) bytes += n;
  }
  spdlog::info("hashing {} file(s) of the models directory ({} MiB) for their digests",
               cat->unhashed().size(), bytes >> 20);
  bool known = false;
  for (const auto& f : cat->unhashed()) {
    if (stopping_) break;
    if (digests_->digest(f, &stopping_)) known = true;
  }
  // Files no longer in the models directory are forgotten.
  std::set<std::string> keep;
  for (const auto& e : cat->entries())
    for (const auto& p : e.file_paths) keep.insert(p);
  keep.insert(cat->unhashed().begin(), cat->unhashed().end());
  digests_->retain(keep);
  try {
    digests_->save();
  } catch (const std::exception& e) {
    spdlog::warn("cannot save the digest cache: {}", e.what());
  }
  return known;
}

bool model_catalog_watch::hide(std::string_view name) {
  const auto* e = get()->find(name);
  if (!e || e->info.source != "local") return false;
  {
    std::lock_guard lk(mu_);
    hidden_.insert(std::string(name));
  }
  spdlog::info("model {} evicted: no longer served until the node restarts (its file {} stays)",
               name, e->path);
  rescan();
  return true;
}

void model_catalog_watch::touch(std::string_view name) {
  if (!store_) return;
  const auto cat = get();
  const auto* e = cat->find(name);
  if (e && e->info.source != "local") store_->touch(name);
}

std::optional<fs::path> model_catalog_watch::file_by_digest(std::string_view digest) const {
  return get()->file_by_digest(digest);
}

std::shared_ptr<const model_catalog> model_catalog_watch::get() const {
  std::lock_guard lk(mu_);
  return catalog_;
}

bool model_catalog_watch::rescan() {
  const std::shared_ptr<const model_catalog> before = get();
  std::shared_ptr<const model_catalog> after;
  try {
    after = std::make_shared<const model_catalog>(model_catalog::scan(sources(), before.get()));
  } catch (const std::exception& e) {
    std::lock_guard lk(mu_);
    if (!unreadable_logged_) spdlog::warn("{}; serving the models found before", e.what());
    unreadable_logged_ = true;
    return false;
  }
  {
    std::lock_guard lk(mu_);
    for (const auto& name : after->shadowed())
      if (shadowed_logged_.insert(name).second)
        spdlog::info("store model {} is not served: the models directory has a model of that name",
                     name);
    // New files to hash, for the watcher's thread.
    if (!after->unhashed().empty()) kick_ = true;
  }
  if (!after->unhashed().empty()) cv_.notify_all();
  if (after->same_as(*before)) {
    std::lock_guard lk(mu_);
    unreadable_logged_ = false;
    return false;
  }
  // What changed, for the log: models by file, skipped files by path.
  std::map<std::string, const model_catalog_entry*> old_models;
  for (const auto& e : before->entries()) old_models[e.path] = &e;
  for (const auto& e : after->entries()) {
    auto it = old_models.find(e.path);
    if (it == old_models.end()) {
      spdlog::info("model {} added ({})", e.info.name, e.path);
    } else {
      if (it->second->stamp != e.stamp) spdlog::info("model {} changed ({})", e.info.name, e.path);
      old_models.erase(it);
    }
  }
  for (const auto& [path, e] : old_models)
    spdlog::info("model {} removed ({})", e->info.name, path);
  std::map<std::string, std::string> old_errors;
  for (const auto& e : before->errors()) old_errors[e.path] = e.error;
  for (const auto& e : after->errors()) {
    auto it = old_errors.find(e.path);
    if (it == old_errors.end() || it->second != e.error)
      spdlog::warn("skipping model {}: {}", e.path, e.error);
  }
  {
    std::lock_guard lk(mu_);
    catalog_ = after;
    unreadable_logged_ = false;
  }
  if (changed_) changed_();
  return true;
}

void model_catalog_watch::run() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    kick_ = false;
    lk.unlock();
    // Digests once known go out with the next node_status (the rescan's `changed`).
    const bool hashed = hash_pending();
    if (hashed && !stopping_) rescan();
    lk.lock();
    if (hashed) continue;
    auto woken = [&] { return stop_ || kick_; };
    if (options_.period.count() > 0) {
      if (cv_.wait_for(lk, options_.period, woken) && stop_) break;
    } else {
      cv_.wait(lk, woken);
      if (stop_) break;
    }
    if (kick_) continue;
    lk.unlock();
    rescan();
    lk.lock();
  }
}

const model_catalog_entry* model_catalog::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& e, std::string_view n) { return e.info.name < n; });
  return it != entries_.end() && it->info.name == name ? &*it : nullptr;
}

std::string model_catalog::path_of(std::string_view name) const {
  const auto* e = find(name);
  return e ? e->path : std::string();
}

std::vector<wire::model_info> model_catalog::models() const {
  std::vector<wire::model_info> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.info);
  return out;
}

}  // namespace hearth::node
