#include "store/digest-cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "store/sha256.h"
#include "store/test-store-dir.h"

namespace hearth::store {
namespace {

namespace fs = std::filesystem;
using testing::generated_bytes;
using testing::store_test_dir;
using testing::write_test_file;

// Sets a file's modification time, so a rewrite in the same instant still counts as a change.
void set_mtime_s(const fs::path& file, time_t s) {
  struct timespec t[2] = {{0, UTIME_OMIT}, {s, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), t, 0), 0);
}

TEST(DigestCache, AFileIsHashedOnceAcrossRestarts) {
  store_test_dir dir;
  const fs::path model = dir.path() / "models" / "a.gguf";
  const std::string bytes = generated_bytes(100000, 1);
  write_test_file(model, bytes);
  {
    digest_cache cache(dir.path() / "digests.json");
    EXPECT_FALSE(cache.known(model));
    EXPECT_EQ(cache.digest(model), sha256_bytes(bytes));
    EXPECT_EQ(cache.digest(model), sha256_bytes(bytes));
    EXPECT_EQ(cache.hashed(), 1u);
    cache.save();
  }
  digest_cache again(dir.path() / "digests.json");
  EXPECT_EQ(again.known(model), sha256_bytes(bytes));
  EXPECT_EQ(again.digest(model), sha256_bytes(bytes));
  EXPECT_EQ(again.hashed(), 0u);
  EXPECT_EQ(again.path_of(sha256_bytes(bytes)), model);
}

TEST(DigestCache, AChangedFileIsHashedAgain) {
  store_test_dir dir;
  const fs::path model = dir.path() / "a.gguf";
  write_test_file(model, generated_bytes(1000, 2));
  set_mtime_s(model, 1000000);
  digest_cache cache(dir.path() / "digests.json");
  const auto first = cache.digest(model);
  // Same size, new content and time.
  const std::string changed = generated_bytes(1000, 3);
  write_test_file(model, changed);
  set_mtime_s(model, 2000000);
  EXPECT_FALSE(cache.known(model));
  EXPECT_FALSE(cache.path_of(*first));
  EXPECT_EQ(cache.digest(model), sha256_bytes(changed));
  EXPECT_EQ(cache.hashed(), 2u);
  // Longer, same time.
  const std::string longer = generated_bytes(2000, 3);
  write_test_file(model, longer);
  set_mtime_s(model, 2000000);
  EXPECT_EQ(cache.digest(model), sha256_bytes(longer));
  EXPECT_EQ(cache.hashed(), 3u);
}

TEST(DigestCache, RetainForgetsFilesThatWentAndGarbageIsAnEmptyCache) {
  store_test_dir dir;
  write_test_file(dir.path() / "a", "a");
  write_test_file(dir.path() / "b", "b");
  {
    digest_cache cache(dir.path() / "digests.json");
    cache.digest(dir.path() / "a");
    cache.digest(dir.path() / "b");
    cache.retain({(dir.path() / "a").string()});
    cache.save();
  }
  digest_cache again(dir.path() / "digests.json");
  EXPECT_TRUE(again.known(dir.path() / "a"));
  EXPECT_FALSE(again.known(dir.path() / "b"));
  for (std::string garbage :
       {"not json", "[]", "{\"files\": 3}",
        R"({"files": {"/x": {"size": -1, "mtime_ns": 1, "digest": "sha256:00"}}})"}) {
    write_test_file(dir.path() / "digests.json", garbage);
    digest_cache bad(dir.path() / "digests.json");
    EXPECT_FALSE(bad.known(dir.path() / "a")) << garbage;
  }
}

TEST(DigestCache, ACancelledHashIsNotRemembered) {
  store_test_dir dir;
  write_test_file(dir.path() / "a", generated_bytes(10000, 4));
  digest_cache cache(dir.path() / "digests.json");
  std::atomic<bool> cancel{true};
  EXPECT_FALSE(cache.digest(dir.path() / "a", &cancel));
  EXPECT_FALSE(cache.known(dir.path() / "a"));
  EXPECT_FALSE(cache.digest(dir.path() / "missing"));
}

}  // namespace
}  // namespace hearth::store
