// Split GGUF models in the models directory: one model named after the parts' prefix, listed by
// its first part (or by a folder holding its parts, as a model store's view holds them); the
// other parts neither models nor skipped files; a split with a part missing skipped, naming it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "node/model-catalog.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;

class model_catalog_split : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hearth_catalog_split_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    stories_ = hearth::testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(stories_.empty());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<std::string> split(const fs::path& prefix, uint32_t n) {
    return hearth::testing::write_stories_split(prefix.string(), n);
  }

  fs::path dir_;
  std::string stories_;
};

TEST_F(model_catalog_split, a_split_model_is_one_model_named_after_its_prefix) {
  const auto parts = split(dir_ / "stories-split", 3);
  ASSERT_EQ(parts.size(), 3u);
  fs::create_symlink(stories_, dir_ / "stories260K.gguf");

  const auto cat = model_catalog::scan(dir_.string());
  EXPECT_TRUE(cat.errors().empty()) << cat.errors().front().error;
  ASSERT_EQ(cat.entries().size(), 2u);
  const auto* m = cat.find("stories-split");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, parts[0]);
  ASSERT_NE(m->file, nullptr);
  EXPECT_EQ(m->file->gguf_paths, parts);
  const auto* whole = cat.find("stories260K");
  ASSERT_NE(whole, nullptr);
  // The same model: the same description, its size all the parts'.
  EXPECT_EQ(m->info.architecture, whole->info.architecture);
  EXPECT_EQ(m->info.quantization, whole->info.quantization);
  EXPECT_EQ(m->info.params_total, whole->info.params_total);
  EXPECT_EQ(m->info.context_length, whole->info.context_length);
  uint64_t on_disk = 0;
  for (const auto& p : parts) on_disk += fs::file_size(p);
  EXPECT_EQ(m->info.size_bytes, on_disk);
  EXPECT_TRUE(cat.skipped().empty());
}

TEST_F(model_catalog_split, a_folder_holding_a_split_is_that_model) {
  const auto parts = split(dir_ / "qwen-view" / "stories-q", 2);
  ASSERT_EQ(parts.size(), 2u);
  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 1u) << (cat.errors().empty() ? "" : cat.errors()[0].error);
  const auto* m = cat.find("qwen-view");
  ASSERT_NE(m, nullptr);
  ASSERT_NE(m->file, nullptr);
  EXPECT_EQ(m->file->gguf_paths, parts);
  EXPECT_EQ(m->info.architecture, "llama");
}

TEST_F(model_catalog_split, a_missing_part_skips_the_model_naming_the_part) {
  const auto parts = split(dir_ / "broken", 3);
  ASSERT_EQ(parts.size(), 3u);
  fs::remove(parts[1]);
  const auto cat = model_catalog::scan(dir_.string());
  EXPECT_TRUE(cat.entries().empty());
  ASSERT_EQ(cat.errors().size(), 1u);  // the first part only: part 3 is not a model of its own
  EXPECT_EQ(cat.errors()[0].path, parts[0]);
  EXPECT_NE(cat.errors()[0].error.find(parts[1] + ", is missing"), std::string::npos)
      << cat.errors()[0].error;
}

TEST_F(model_catalog_split, a_part_changing_is_a_change_to_the_model) {
  const auto parts = split(dir_ / "s", 2);
  ASSERT_EQ(parts.size(), 2u);
  const uint64_t before = model_file_stamp(parts[0]);
  ASSERT_NE(before, 0u);
  const auto first = model_catalog::scan(dir_.string());
  ASSERT_EQ(first.entries().size(), 1u);

  fs::resize_file(parts[1], fs::file_size(parts[1]) / 2);  // part 2 truncated
  EXPECT_NE(model_file_stamp(parts[0]), before);
  const auto again = model_catalog::scan(dir_.string(), &first);
  EXPECT_TRUE(again.entries().empty());  // read again, not taken from the previous scan
  ASSERT_EQ(again.errors().size(), 1u);
  EXPECT_NE(again.errors()[0].error.find(parts[1]), std::string::npos) << again.errors()[0].error;
}

}  // namespace
}  // namespace hearth::node
