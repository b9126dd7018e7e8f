// The device registry: the one ranking, the choice of the best device, the report, and loading
// modules that are missing, broken or of another version (fixtures: backends/module-fixture.cpp).
#include "backends/registry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/modules.h"

namespace hearth::gpu {
namespace {

device gpu(backend_kind backend, int index, const char* name, device_type type, uint64_t memory) {
  device d;
  d.name = name;
  d.backend = backend;
  d.index = index;
  d.type = type;
  d.memory_total = memory;
  return d;
}

backend_entry entry(backend_kind kind, const char* name, std::vector<device> devices) {
  backend_entry e;
  e.kind = kind;
  e.name = name;
  e.title = name;
  e.loaded = true;
  e.devices = [devices] { return devices; };
  return e;
}

TEST(device_ranking, type_then_backend_order_then_memory) {
  const auto big_igpu = gpu(backend_kind::vulkan, 0, "iGPU", device_type::integrated, 64ull << 30);
  const auto small_dgpu = gpu(backend_kind::vulkan, 1, "dGPU", device_type::discrete, 4ull << 30);
  const auto cpu_impl = gpu(backend_kind::vulkan, 2, "llvmpipe", device_type::cpu, 64ull << 30);
  const auto other = gpu(backend_kind::vulkan, 3, "?", device_type::other, 1ull << 30);
  EXPECT_TRUE(device_better(small_dgpu, 0, big_igpu, 0));
  EXPECT_FALSE(device_better(big_igpu, 0, small_dgpu, 0));
  EXPECT_TRUE(device_better(other, 0, cpu_impl, 0));
  // The same card seen by two backends: the one registered first.
  const auto on_cuda = gpu(backend_kind::cuda, 0, "RTX", device_type::discrete, 23ull << 30);
  const auto on_vulkan = gpu(backend_kind::vulkan, 0, "RTX", device_type::discrete, 24ull << 30);
  EXPECT_TRUE(device_better(on_cuda, 1, on_vulkan, 2));
  EXPECT_FALSE(device_better(on_vulkan, 2, on_cuda, 1));
  // Within a backend, the most memory.
  const auto more = gpu(backend_kind::vulkan, 4, "dGPU 8G", device_type::discrete, 8ull << 30);
  EXPECT_TRUE(device_better(more, 0, small_dgpu, 0));
}

TEST(registry, best_takes_the_kind_asked_for_and_auto_skips_cpu_implementations) {
  registry r;
  r.add(entry(backend_kind::cpu, "cpu", {gpu(backend_kind::cpu, 0, "CPU", device_type::cpu, 1)}));
  r.add(entry(backend_kind::cuda, "cuda",
              {gpu(backend_kind::cuda, 0, "RTX", device_type::discrete, 23ull << 30)}));
  r.add(entry(backend_kind::vulkan, "vulkan",
              {gpu(backend_kind::vulkan, 0, "llvmpipe", device_type::cpu, 64ull << 30),
               gpu(backend_kind::vulkan, 1, "RTX", device_type::discrete, 24ull << 30)}));
  device d;
  const backend_entry* e = nullptr;
  ASSERT_TRUE(r.best(backend_kind::automatic, d, e));
  EXPECT_EQ(e->name, "cuda");
  EXPECT_EQ(d.name, "RTX");
  ASSERT_TRUE(r.best(backend_kind::vulkan, d, e));
  EXPECT_EQ(e->name, "vulkan");
  EXPECT_EQ(d.index, 1);

  registry lavapipe_only;
  lavapipe_only.add(entry(backend_kind::vulkan, "vulkan",
                          {gpu(backend_kind::vulkan, 0, "llvmpipe", device_type::cpu, 1)}));
  EXPECT_FALSE(lavapipe_only.best(backend_kind::automatic, d, e));
  ASSERT_TRUE(lavapipe_only.best(backend_kind::vulkan, d, e));  // asked for by name: yes
  EXPECT_EQ(d.name, "llvmpipe");
  EXPECT_EQ(lavapipe_only.why_no_device(backend_kind::vulkan), "");
}

TEST(registry, the_report_says_what_loaded_and_why_the_rest_did_not) {
  registry r;
  r.add(entry(backend_kind::cpu, "cpu", {gpu(backend_kind::cpu, 0, "CPU", device_type::cpu, 1)}));
  backend_entry cuda;
  cuda.kind = backend_kind::cuda;
  cuda.name = "cuda";
  cuda.why = "libhearth-cuda.so: libcublas.so.13: cannot open shared object file";
  r.add(cuda);
  backend_entry vulkan = entry(backend_kind::vulkan, "vulkan", {});
  vulkan.why = "no Vulkan device";
  r.add(vulkan);
  EXPECT_EQ(registry_report(r),
            (std::vector<std::string>{
                "cpu: loaded, 1 device",
                "cuda: not loaded: libhearth-cuda.so: libcublas.so.13: cannot open shared object "
                "file",
                "vulkan: loaded, no device: no Vulkan device"}));
  EXPECT_EQ(r.why_no_device(backend_kind::cuda),
            "not loaded: libhearth-cuda.so: libcublas.so.13: cannot open shared object file");
  EXPECT_EQ(r.why_no_device(backend_kind::vulkan), "no device: no Vulkan device");
  device d;
  const backend_entry* e = nullptr;
  EXPECT_FALSE(r.best(backend_kind::automatic, d, e));
}

TEST(registry, the_process_registry_has_every_backend_and_the_cpu_first) {
  const registry& r = device_registry();
  ASSERT_EQ(r.backends().size(), 3u);
  EXPECT_EQ(r.backends()[0].name, "cpu");
  EXPECT_TRUE(r.backends()[0].loaded);
  EXPECT_EQ(r.backends()[0].devices().size(), 1u);
  EXPECT_EQ(r.backends()[1].name, "cuda");
  EXPECT_EQ(r.backends()[2].name, "vulkan");
  for (const auto& e : r.backends()) {
    if (!e.loaded) {
      EXPECT_FALSE(e.why.empty()) << e.name;
    }
  }
}

// Sets HEARTH_BACKEND_PATH for one test.
class module_path : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("HEARTH_BACKEND_PATH"); }
  static void use(const std::string& dirs) { setenv("HEARTH_BACKEND_PATH", dirs.c_str(), 1); }
  static std::string fixture(const char* name) {
    return std::string(HEARTH_FIXTURE_MODULES) + "/" + name;
  }
};

TEST_F(module_path, the_default_folders_are_beside_the_executable_and_lib_hearth) {
  unsetenv("HEARTH_BACKEND_PATH");
  const auto dirs = backend_module_dirs();
  ASSERT_EQ(dirs.size(), 2u);
  const auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  EXPECT_EQ(dirs[0], exe.string());
  EXPECT_EQ(dirs[1], (exe.parent_path() / "lib" / "hearth").string());
}

TEST_F(module_path, a_missing_module_says_where_it_was_looked_for) {
  use("/nonexistent/a:/nonexistent/b");
  const backend_entry e = backend_module_load(backend_kind::cuda, "CUDA");
  EXPECT_FALSE(e.loaded);
  EXPECT_EQ(e.name, "cuda");
  EXPECT_EQ(e.why, "libhearth-cuda.so not found (looked in /nonexistent/a, /nonexistent/b)");
}

TEST_F(module_path, a_module_whose_library_is_missing_says_which) {
  use(fixture("unresolvable"));
  const backend_entry e = backend_module_load(backend_kind::cuda, "CUDA");
  EXPECT_FALSE(e.loaded);
  EXPECT_NE(e.why.find("libhearth_fixture_hidden.so: cannot open shared object file"),
            std::string::npos)
      << e.why;
}

TEST_F(module_path, a_module_of_another_version_is_refused) {
  use(fixture("wrong_version"));
  const backend_entry e = backend_module_load(backend_kind::cuda, "CUDA");
  EXPECT_FALSE(e.loaded);
  EXPECT_NE(e.why.find("a module from another build"), std::string::npos) << e.why;
}

TEST_F(module_path, a_file_that_is_no_library_is_refused_with_dlopens_reason) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("hearth-module-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libhearth-vulkan.so") << "not a shared object\n";
  use(dir.string());
  const backend_entry e = backend_module_load(backend_kind::vulkan, "Vulkan");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(e.loaded);
  EXPECT_NE(e.why.find("libhearth-vulkan.so"), std::string::npos) << e.why;
}

// Label vulkan (gpu_registry_vulkan): the real module, loaded from build/<preset>/lib/hearth, lists
// Mesa's lavapipe (what CI has) through the registry and starts a backend on it.
TEST(vulkan_module, lists_lavapipe_through_the_registry) {
  const backend_entry* e = device_registry().find(backend_kind::vulkan);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->loaded) << e->why;
  const auto list = e->devices();
  ASSERT_FALSE(list.empty()) << e->why;
  const device* lavapipe = nullptr;
  for (const auto& d : list)
    if (d.name.find("llvmpipe") != std::string::npos) lavapipe = &d;
  ASSERT_NE(lavapipe, nullptr) << list.front().name;
  EXPECT_EQ(lavapipe->backend, backend_kind::vulkan);
  EXPECT_EQ(lavapipe->type, device_type::cpu);
  EXPECT_EQ(lavapipe->vendor, "Mesa");
  EXPECT_GT(lavapipe->memory_total, 0u);
  EXPECT_FALSE(lavapipe->heaps.empty());
  auto b = e->make(lavapipe->index);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->name(), "vulkan");
  EXPECT_THROW(e->make(int(list.size())), std::runtime_error);
}

}  // namespace
}  // namespace hearth::gpu
