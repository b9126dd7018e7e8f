#include "backends/modules.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "backends/module.h"

namespace hearth::gpu {

std::vector<std::string> backend_module_dirs() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("HEARTH_BACKEND_PATH");
  if (env && *env) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t colon = s.find(':', start);
      const std::string dir = s.substr(start, colon == std::string::npos ? colon : colon - start);
      if (!dir.empty()) dirs.push_back(dir);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    return dirs;
  }
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return dirs;
  const auto bin = exe.parent_path();
  dirs.push_back(bin.string());
  dirs.push_back((bin.parent_path() / "lib" / "hearth").lexically_normal().string());
  return dirs;
}

backend_entry backend_module_load(backend_kind kind, const std::string& title) {
  backend_entry e;
  e.kind = kind;
  e.name = backend_kind_name(kind);
  e.title = title;
  const std::string file = "libhearth-" + e.name + ".so";

  const auto dirs = backend_module_dirs();
  std::string path;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (std::filesystem::exists(dir + "/" + file, ec)) {
      path = dir + "/" + file;
      break;
    }
  }
  if (path.empty()) {
    std::string where;
    for (const auto& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
    e.why = file + " not found (looked in " + (where.empty() ? "no folder" : where) + ")";
    return e;
  }
  // RTLD_LOCAL: each module keeps its own copy of the engine's objects to itself (see
  // backends/CMakeLists.txt). Never dlclosed: drivers do not all survive being unloaded.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    e.why = err ? err : path + ": dlopen failed";
    return e;
  }
  auto init =
      reinterpret_cast<hearth_backend_module_init_fn>(dlsym(handle, HEARTH_BACKEND_MODULE_INIT));
  if (!init) {
    e.why = path + ": no " HEARTH_BACKEND_MODULE_INIT " (not a hearth backend module)";
    return e;
  }
  const backend_module* m = init();
  if (!m || m->api_version != backend_module_api_version || m->device_size != sizeof(device)) {
    e.why = path + ": built for backend module API " +
            (m ? std::to_string(m->api_version) : std::string("?")) + ", this program has " +
            std::to_string(backend_module_api_version) + " (a module from another build)";
    return e;
  }
  if (m->kind != kind || !m->devices || !m->make) {
    e.why = path + ": the module is not the " + title + " backend";
    return e;
  }
  e.loaded = true;
  e.devices = [m] {
    std::string why_none;
    return m->devices(why_none);
  };
  e.make = [m](int index) { return m->make(index); };
  // Enumerated once here for the reason: a module without devices says why.
  std::string why_none;
  if (m->devices(why_none).empty()) e.why = why_none.empty() ? "no " + title + " device" : why_none;
  return e;
}

}  // namespace hearth::gpu
