#include "store/model-store.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <system_error>

#include "store/file-io.h"

namespace hearth::store {

namespace fs = std::filesystem;

namespace {

// Manifests are small (a model's file list and its source's metadata); a bigger file is not one.
constexpr size_t k_manifest_max_bytes = size_t(16) << 20;

int64_t store_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A name for a temporary entry, unique per process and call, that says which process made it:
// ".<base>.tmp-<pid>-<n>". reconcile removes those of processes that are gone.
std::string store_tmp_name(std::string_view base) {
  static std::atomic<uint64_t> counter{0};
  return "." + std::string(base) + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

// Whether an entry is a temporary (of write_file_atomic or store_tmp_name: a name ending in
// ".tmp-<pid>-<n>", nothing after it, so no model's file is taken for one) left by a process that
// no longer runs.
bool store_tmp_stale(const std::string& name) {
  auto at = name.rfind(".tmp-");
  if (at == std::string::npos) return false;
  const char* p = name.c_str() + at + 5;
  char* end = nullptr;
  long pid = std::strtol(p, &end, 10);
  if (end == p || *end != '-' || pid <= 0) return false;
  p = end + 1;
  std::strtoull(p, &end, 10);
  if (end == p || *end != '\0') return false;
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

void store_set_mtime(const fs::path& file, int64_t ms) {
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1].tv_sec = ms / 1000;
  times[1].tv_nsec = (ms % 1000) * 1000000;
  if (::utimensat(AT_FDCWD, file.c_str(), times, 0) != 0)
    throw_errno(errno, "setting the time of " + file.string());
}

int64_t store_mtime_ms(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

// Copies src's bytes into the open dst (copy_file_range, else read/write).
void store_copy_bytes(int src, int dst, const fs::path& what) {
  for (;;) {
    ssize_t n = ::copy_file_range(src, nullptr, dst, nullptr, size_t(1) << 30, 0);
    if (n == 0) return;
    if (n > 0) continue;
    if (errno == EINTR) continue;
    if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) break;
    throw_errno(errno, "copying " + what.string());
  }
  std::vector<char> buf(size_t(1) << 20);
  for (;;) {
    ssize_t n = ::read(src, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(errno, "reading " + what.string());
    if (n == 0) return;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(dst, buf.data() + done, size_t(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw_errno(errno, "copying " + what.string());
      done += w;
    }
  }
}

}  // namespace

fs::path default_store_root() {
  if (const char* s = std::getenv("HEARTH_STORE"); s && *s) return s;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
    return fs::path(x) / "hearth" / "store";
  if (const char* h = std::getenv("HOME"); h && *h)
    return fs::path(h) / ".local" / "share" / "hearth" / "store";
  return "/var/lib/hearth/store";
}

model_store::model_store(fs::path root, uint64_t limit_bytes)
    : root_(std::move(root)), limit_(limit_bytes) {
  for (const char* d : {"blobs", "partial", "manifests", "models"})
    fs::create_directories(root_ / d);
  file_lock lock(root_ / "lock");
  reconcile_views();
}

fs::path model_store::blob_path(std::string_view digest) const {
  if (!sha256_digest_valid(digest)) return {};
  return root_ / "blobs" / ("sha256-" + std::string(sha256_digest_hex(digest)));
}

bool model_store::has_blob(std::string_view digest) const {
  if (!sha256_digest_valid(digest)) return false;
  struct stat st {};
  return ::stat(blob_path(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

fs::path model_store::manifest_path(std::string_view name) const {
  return root_ / "manifests" / (std::string(name) + ".json");
}

uint64_t model_store::used() const {
  uint64_t total = 0;
  for (const char* d : {"blobs", "partial"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / d, ec)) {
      // Journals are bookkeeping, not content: what the limit bounds is blobs.
      if (e.path().extension() == ".ranges") continue;
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += uint64_t(st.st_size);
    }
  }
  return total;
}

uint64_t model_store::capacity() const {
  struct statvfs vfs {};
  uint64_t free = 0;
  if (::statvfs(root_.c_str(), &vfs) == 0) free = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
  if (limit_ == 0) return free;
  uint64_t u = used();
  return std::min(free, limit_ > u ? limit_ - u : 0);
}

std::unique_ptr<partial_blob> model_store::open_partial(std::string_view digest, uint64_t size) {
  if (!sha256_digest_valid(digest))
    throw std::invalid_argument("not a digest: \"" + std::string(digest) + "\"");
  if (has_blob(digest))
    throw std::invalid_argument("blob " + std::string(digest) + " is already in the store");
  // A .part of this size already holds its room (preallocated, counted in used()).
  auto part = root_ / "partial" / ("sha256-" + std::string(sha256_digest_hex(digest)) + ".part");
  struct stat st {};
  bool resumable = ::stat(part.c_str(), &st) == 0 && uint64_t(st.st_size) == size;
  if (!resumable) {
    uint64_t room = capacity();
    if (room < size) throw no_space(size, room);
  }
  return std::make_unique<partial_blob>(root_ / "partial", root_ / "blobs", std::string(digest),
                                        size);
}

fs::path model_store::import_file(const fs::path& src, std::string_view digest) {
  if (!digest.empty() && !sha256_digest_valid(digest))
    throw std::invalid_argument("not a digest: \"" + std::string(digest) + "\"");
  if (!digest.empty() && has_blob(digest)) return blob_path(digest);
  // The file itself, not a symlink to it (a Hugging Face cache's snapshots are symlinks).
  const fs::path real = fs::canonical(src);
  const fs::path tmp = root_ / "partial" / store_tmp_name("import");
  bool linked = ::link(real.c_str(), tmp.c_str()) == 0;
  if (!linked) {
    int in = ::open(real.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw_errno(errno, "opening " + real.string());
    int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
      int e = errno;
      ::close(in);
      throw_errno(e, "creating " + tmp.string());
    }
    try {
      if (::ioctl(out, FICLONE, in) != 0) {
        struct stat st {};
        ::fstat(in, &st);
        uint64_t room = capacity();
        if (room < uint64_t(st.st_size)) throw no_space(uint64_t(st.st_size), room);
        store_copy_bytes(in, out, real);
      }
      if (::fsync(out) != 0) throw_errno(errno, "fsync of " + tmp.string());
      if (::fchmod(out, 0444) != 0) throw_errno(errno, "chmod of " + tmp.string());
    } catch (...) {
      ::close(in);
      ::close(out);
      ::unlink(tmp.c_str());
      throw;
    }
    ::close(in);
    ::close(out);
  }
  // What is hashed is what becomes the blob (the copy, or the linked inode itself).
  std::string actual;
  try {
    actual = sha256_file(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (!digest.empty() && actual != digest) {
    ::unlink(tmp.c_str());
    throw digest_mismatch(std::string(digest), actual);
  }
  const fs::path blob = blob_path(actual);
  if (has_blob(actual)) {
    ::unlink(tmp.c_str());
    return blob;
  }
  if (::rename(tmp.c_str(), blob.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw_errno(e, "renaming " + tmp.string() + " to " + blob.string());
  }
  fsync_dir(root_ / "blobs");
  return blob;
}

std::optional<manifest> model_store::read_manifest(const fs::path& file) const {
  std::string text;
  if (!read_small_file(file, k_manifest_max_bytes, text)) return std::nullopt;
  auto m = manifest_from_json(text);
  if (!m || m->name != file.stem().string()) return std::nullopt;
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) m->last_used_ms = store_mtime_ms(st);
  return std::move(m).value();
}

std::optional<manifest> model_store::find(std::string_view name_or_alias) const {
  if (model_name_valid(name_or_alias))
    if (auto m = read_manifest(manifest_path(name_or_alias))) return m;
  for (auto& m : list())
    if (std::find(m.aliases.begin(), m.aliases.end(), name_or_alias) != m.aliases.end()) return m;
  return std::nullopt;
}

std::vector<manifest> model_store::list() const {
  std::vector<manifest> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "manifests", ec)) {
    const auto name = e.path().filename().string();
    if (name.starts_with(".") || e.path().extension() != ".json") continue;
    if (auto m = read_manifest(e.path())) out.push_back(std::move(*m));
  }
  std::sort(out.begin(), out.end(),
            [](const manifest& a, const manifest& b) { return a.name < b.name; });
  return out;
}

void model_store::put_manifest(const manifest& given) {
  if (auto ok = manifest_check(given); !ok) throw bad_manifest("manifest: " + ok.message());
  manifest m = given;
  if (m.digest.empty()) m.digest = model_digest(m.files);
  if (m.created_ms == 0) m.created_ms = store_now_ms();
  file_lock lock(root_ / "lock");
  for (const auto& f : m.files) {
    struct stat st {};
    if (::stat(blob_path(f.digest).c_str(), &st) != 0)
      throw bad_manifest("manifest: the blob of \"" + f.path + "\" (" + f.digest +
                         ") is not in the store");
    if (uint64_t(st.st_size) != f.size)
      throw bad_manifest("manifest: \"" + f.path + "\" is " + std::to_string(f.size) +
                         " bytes, its blob " + std::to_string(st.st_size));
  }
  // The manifest first, then its view: a kill in between leaves a manifest without a view, which
  // the next open gives its view (reconcile_views).
  const auto file = manifest_path(m.name);
  write_file_atomic(file, manifest_to_json(m).dump(2) + "\n");
  store_set_mtime(file, m.last_used_ms ? m.last_used_ms : store_now_ms());
  write_view(m);
}

void model_store::write_view(const manifest& m) const {
  const fs::path models = views();
  const fs::path tmp = models / store_tmp_name(m.name);
  if (m.kind == manifest_kind_gguf) {
    fs::create_symlink(fs::path("..") / "blobs" / blob_path(m.files[0].digest).filename(), tmp);
    fs::rename(tmp, models / (m.name + ".gguf"));
    std::error_code ec;
    fs::remove_all(models / m.name, ec);
  } else {
    fs::create_directory(tmp);
    for (const auto& f : m.files) {
      const fs::path link = tmp / f.path;
      fs::create_directories(link.parent_path());
      fs::path target;
      // One ".." per component of the path, and one for the model's folder.
      for (const auto& component : fs::path(f.path)) {
        (void)component;
        target /= "..";
      }
      target = target / ".." / "blobs" / blob_path(f.digest).filename();
      fs::create_symlink(target, link);
    }
    const fs::path view = models / m.name;
    std::error_code ec;
    if (fs::exists(fs::symlink_status(view))) {
      const fs::path old = models / store_tmp_name(m.name + ".old");
      fs::rename(view, old);
      fs::rename(tmp, view);
      fs::remove_all(old, ec);
    } else {
      fs::rename(tmp, view);
    }
    fs::remove(models / (m.name + ".gguf"), ec);
  }
  fsync_dir(models);
}

void model_store::remove_view(std::string_view name) const {
  std::error_code ec;
  fs::remove(views() / (std::string(name) + ".gguf"), ec);
  fs::remove_all(views() / std::string(name), ec);
}

void model_store::reconcile_views() {
  std::map<std::string, std::string> kinds;  // name -> kind, of every readable manifest
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "manifests", ec)) {
    const auto name = e.path().filename().string();
    if (store_tmp_stale(name)) fs::remove(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(root_ / "partial", ec)) {
    const auto name = e.path().filename().string();
    if (store_tmp_stale(name)) fs::remove(e.path(), ec);
  }
  for (auto& m : list()) {
    kinds[m.name] = m.kind;
    bool one_file = m.kind == manifest_kind_gguf;
    auto view = views() / (one_file ? m.name + ".gguf" : m.name);
    if (!fs::exists(fs::symlink_status(view))) write_view(m);
  }
  for (const auto& e : fs::directory_iterator(views(), ec)) {
    const auto entry = e.path().filename().string();
    if (entry.starts_with(".")) {
      if (store_tmp_stale(entry)) fs::remove_all(e.path(), ec);
      continue;
    }
    bool gguf = e.path().extension() == ".gguf" && fs::is_symlink(e.symlink_status());
    auto name = gguf ? e.path().stem().string() : entry;
    auto it = kinds.find(name);
    bool keep = it != kinds.end() && (it->second == manifest_kind_gguf) == gguf;
    if (!keep) fs::remove_all(e.path(), ec);
  }
}

bool model_store::remove(std::string_view name) {
  file_lock lock(root_ / "lock");
  return remove_locked(name);
}

bool model_store::remove_locked(std::string_view name) {
  if (!model_name_valid(name)) return false;
  const auto file = manifest_path(name);
  auto m = read_manifest(file);
  if (!m) return false;
  // The manifest first: a kill afterwards leaves a view without a manifest (removed at the next
  // open) and unused blobs, never a model with a missing file.
  if (::unlink(file.c_str()) != 0) throw_errno(errno, "removing " + file.string());
  fsync_dir(root_ / "manifests");
  remove_view(name);
  std::set<std::string> still_used;
  for (const auto& other : list())
    for (const auto& f : other.files) still_used.insert(f.digest);
  for (const auto& f : m->files)
    if (!still_used.count(f.digest)) ::unlink(blob_path(f.digest).c_str());
  fsync_dir(root_ / "blobs");
  return true;
}

void model_store::touch(std::string_view name, int64_t now_ms) {
  if (!model_name_valid(name)) return;
  const auto file = manifest_path(name);
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return;
  store_set_mtime(file, now_ms ? now_ms : store_now_ms());
}

std::vector<std::string> model_store::make_room(uint64_t need,
                                                const std::set<std::string>& in_use) {
  file_lock lock(root_ / "lock");
  std::vector<std::string> evicted;
  while (capacity() < need) {
    std::optional<manifest> oldest;
    for (auto& m : list()) {
      if (m.pinned || in_use.count(m.name)) continue;
      if (!oldest || m.last_used_ms < oldest->last_used_ms) oldest = std::move(m);
    }
    if (!oldest) break;
    remove_locked(oldest->name);
    evicted.push_back(oldest->name);
  }
  return evicted;
}

}  // namespace hearth::store
