// The models directory scan: names, metadata and quantization from GGUF headers, bad files
// reported and skipped, an unreadable directory an exception naming it.
#include "node/model-catalog.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "engine/convert/hf-export.h"
#include "engine/io/gguf-writer.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;

class model_catalog_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hearth_catalog_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void link(const std::string& relative, const std::string& name) {
    const std::string target = hearth::testing::testdata_path(relative);
    ASSERT_FALSE(target.empty());
    fs::create_symlink(fs::absolute(target), dir_ / name);
  }
  void write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }

  fs::path dir_;
};

TEST_F(model_catalog_test, a_hugging_face_model_folder_is_a_model) {
  const std::string gguf =
      hearth::testing::testdata_path("models/synthetic/synthetic-qwen2-a.f16.gguf");
  ASSERT_FALSE(gguf.empty());
  auto written = hf_export(gguf, (dir_ / "qwen-hf").string(), {.n_shards = 2});
  ASSERT_TRUE(written.ok()) << written.message();
  fs::create_directories(dir_ / "empty-folder");  // no config.json: not a model
  fs::create_directories(dir_ / "bad-hf");
  write("bad-hf/config.json", "{\"model_type\": \"mamba\"}");

  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 1u);
  const auto* m = cat.find("qwen-hf");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->info.architecture, "qwen2");
  EXPECT_EQ(m->info.quantization, "F16");
  EXPECT_EQ(m->info.context_length, 4096u);
  // The safetensors files: their data sections plus a JSON header each.
  EXPECT_GT(m->info.size_bytes, written->tensor_bytes);
  EXPECT_LT(m->info.size_bytes, written->tensor_bytes + (1u << 20));
  EXPECT_EQ(cat.path_of("qwen-hf"), (dir_ / "qwen-hf").string());
  ASSERT_EQ(cat.errors().size(), 1u);
  EXPECT_NE(cat.errors()[0].error.find("mamba"), std::string::npos) << cat.errors()[0].error;
}

TEST_F(model_catalog_test, describes_every_gguf_file_and_skips_broken_ones) {
  link("models/stories260K.gguf", "stories260K.gguf");
  link("models/synthetic/synthetic-llama-a.q4_k_m.gguf", "llama-q4.gguf");
  link("models/synthetic/synthetic-qwen2-a.q8_0.gguf", "qwen.gguf");
  write("broken.gguf", "this is not a GGUF file");
  write("notes.txt", "not a model");
  fs::create_directories(dir_ / "nested.gguf");  // a directory, not a model
  fs::create_directories(dir_ / "sub");
  fs::copy_file(dir_ / "qwen.gguf", dir_ / "sub" / "deep.gguf");  // not recursive

  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 3u);
  const auto models = cat.models();
  EXPECT_EQ(models[0].name, "llama-q4");
  EXPECT_EQ(models[1].name, "qwen");
  EXPECT_EQ(models[2].name, "stories260K");

  const auto* s = cat.find("stories260K");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->info.architecture, "llama");
  EXPECT_EQ(s->info.quantization, "F32");  // no general.file_type: the type of most bytes
  EXPECT_EQ(s->info.size_bytes, fs::file_size(dir_ / "stories260K.gguf"));
  EXPECT_EQ(s->info.context_length, 2048u);
  EXPECT_FALSE(s->info.loaded);
  EXPECT_EQ(cat.path_of("stories260K"), (dir_ / "stories260K.gguf").string());

  EXPECT_EQ(cat.find("llama-q4")->info.quantization, "Q4_K_M");
  EXPECT_EQ(cat.find("qwen")->info.architecture, "qwen2");
  EXPECT_EQ(cat.find("qwen")->info.quantization, "Q8_0");
  EXPECT_EQ(cat.find("qwen")->info.context_length, 4096u);

  EXPECT_EQ(cat.find("broken"), nullptr);
  EXPECT_EQ(cat.find("deep"), nullptr);
  EXPECT_EQ(cat.path_of("nothing"), "");
  ASSERT_EQ(cat.errors().size(), 1u);
  EXPECT_EQ(cat.errors()[0].path, (dir_ / "broken.gguf").string());
  EXPECT_FALSE(cat.errors()[0].error.empty());
}

// The catalog describes a model from the handle the loader opens (engine/model-file.h): a file
// the engine cannot load is reported, not advertised.
TEST_F(model_catalog_test, a_model_the_engine_cannot_load_is_reported_not_advertised) {
  const std::string mamba = hearth::testing::write_stories_variant(
      "catalog_mamba",
      {.metadata = [](gguf_writer& w) { w.set_string("general.architecture", "mamba"); }});
  fs::copy_file(mamba, dir_ / "mamba.gguf");
  const std::string no_layers = hearth::testing::write_stories_variant(
      "catalog_no_layers", {.metadata = [](gguf_writer& w) { w.set_u32("llama.block_count", 0); }});
  fs::copy_file(no_layers, dir_ / "no-layers.gguf");
  link("models/stories260K.gguf", "stories260K.gguf");

  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 1u);
  EXPECT_NE(cat.find("stories260K"), nullptr);
  ASSERT_EQ(cat.errors().size(), 2u);
  EXPECT_NE(cat.errors()[0].error.find("architecture 'mamba' is not supported"), std::string::npos)
      << cat.errors()[0].error;
  EXPECT_NE(cat.errors()[1].error.find("must be positive"), std::string::npos)
      << cat.errors()[1].error;
}

// The template a node formats chat jobs with, advertised so the broker can refuse chat jobs
// for models that have none.
TEST_F(model_catalog_test, a_models_chat_template_is_described_by_name) {
  const std::string chatml = hearth::testing::write_stories_variant(
      "catalog_chatml", {.metadata = [](gguf_writer& w) {
        w.set_string("tokenizer.chat_template", hearth::testing::k_chatml_template);
      }});
  fs::copy_file(chatml, dir_ / "chatty.gguf");
  link("models/stories260K.gguf", "stories260K.gguf");
  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 2u) << (cat.errors().empty() ? "" : cat.errors()[0].error);
  EXPECT_EQ(cat.find("chatty")->info.chat_template, "chatml");
  EXPECT_EQ(cat.find("stories260K")->info.chat_template, "");
}

TEST_F(model_catalog_test, an_empty_directory_has_no_models) {
  const auto cat = model_catalog::scan(dir_.string());
  EXPECT_TRUE(cat.entries().empty());
  EXPECT_TRUE(cat.errors().empty());
}

TEST_F(model_catalog_test, a_missing_directory_throws_naming_it) {
  const std::string missing = (dir_ / "absent").string();
  try {
    model_catalog::scan(missing);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(model_catalog_test, a_dangling_symbolic_link_is_reported_with_its_target) {
  fs::create_symlink(dir_ / "gone" / "model.gguf", dir_ / "linked.gguf");
  link("models/stories260K.gguf", "stories260K.gguf");
  const auto cat = model_catalog::scan(dir_.string());
  ASSERT_EQ(cat.entries().size(), 1u);
  ASSERT_EQ(cat.errors().size(), 1u);
  EXPECT_EQ(cat.errors()[0].path, (dir_ / "linked.gguf").string());
  EXPECT_NE(cat.errors()[0].error.find("dangling symbolic link to " +
                                       (dir_ / "gone" / "model.gguf").string()),
            std::string::npos)
      << cat.errors()[0].error;
  const auto skipped = cat.skipped();
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].file, "linked.gguf");  // the name in the folder, not the node's path
}

// What the node advertises is bounded, whatever the folder holds.
TEST_F(model_catalog_test, skipped_files_are_advertised_within_bounds) {
  for (int i = 0; i < 70; ++i) write("bad-" + std::to_string(100 + i) + ".gguf", "not GGUF");
  fs::create_symlink(std::string(2000, 'x') + "\xc3\xa9", dir_ / "long.gguf");
  const auto cat = model_catalog::scan(dir_.string());
  EXPECT_EQ(cat.errors().size(), 71u);
  const auto skipped = cat.skipped();
  ASSERT_EQ(skipped.size(), model_catalog::k_max_skipped_advertised);
  for (const auto& f : skipped)
    EXPECT_LE(f.error.size(), model_catalog::k_max_skipped_error_bytes + 3) << f.file;
  EXPECT_EQ(skipped.back().file, "bad-163.gguf");
}

// Files added, replaced, broken and removed while the node runs are seen by a rescan; files that
// did not change are not read again.
TEST_F(model_catalog_test, a_rescan_sees_added_changed_and_removed_files) {
  const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
  ASSERT_FALSE(stories.empty());
  fs::copy_file(stories, dir_ / "a.gguf");
  int changes = 0;
  model_catalog_watch watch(dir_.string(), std::chrono::milliseconds(0), [&] { ++changes; });
  EXPECT_EQ(watch.get()->models().size(), 1u);
  EXPECT_FALSE(watch.rescan());  // nothing changed
  EXPECT_EQ(changes, 0);

  const auto before = watch.get();
  fs::copy_file(stories, dir_ / "b.gguf");
  EXPECT_TRUE(watch.rescan());
  EXPECT_EQ(changes, 1);
  ASSERT_EQ(watch.get()->models().size(), 2u);
  EXPECT_EQ(before->models().size(), 1u);  // a snapshot a reader holds does not change

  // b.gguf cut short (a download still running): skipped with the reason, then whole again.
  fs::resize_file(dir_ / "b.gguf", 1000);
  EXPECT_TRUE(watch.rescan());
  EXPECT_EQ(watch.get()->find("b"), nullptr);
  ASSERT_EQ(watch.get()->skipped().size(), 1u);
  EXPECT_EQ(watch.get()->skipped()[0].file, "b.gguf");
  fs::remove(dir_ / "b.gguf");
  fs::copy_file(stories, dir_ / "b.gguf");
  EXPECT_TRUE(watch.rescan());
  EXPECT_NE(watch.get()->find("b"), nullptr);
  EXPECT_TRUE(watch.get()->skipped().empty());

  // An unchanged file is taken from the last scan: its magic overwritten but its size and time
  // put back, it is not opened again and is still served; with a new time it is read again.
  const auto when = fs::last_write_time(dir_ / "a.gguf");
  {
    std::fstream f(dir_ / "a.gguf", std::ios::binary | std::ios::in | std::ios::out);
    f.write("XXXX", 4);
  }
  fs::last_write_time(dir_ / "a.gguf", when);
  EXPECT_FALSE(watch.rescan());
  EXPECT_NE(watch.get()->find("a"), nullptr);
  fs::last_write_time(dir_ / "a.gguf", when + std::chrono::seconds(1));
  EXPECT_TRUE(watch.rescan());
  EXPECT_EQ(watch.get()->find("a"), nullptr);
  ASSERT_EQ(watch.get()->skipped().size(), 1u);

  fs::remove(dir_ / "a.gguf");
  EXPECT_TRUE(watch.rescan());
  EXPECT_TRUE(watch.get()->skipped().empty());
  EXPECT_EQ(changes, 5);

  // A folder that cannot be read any more keeps the last catalog.
  fs::remove_all(dir_);
  EXPECT_FALSE(watch.rescan());
  EXPECT_NE(watch.get()->find("b"), nullptr);
  fs::create_directories(dir_);
}

TEST_F(model_catalog_test, the_watcher_rescans_on_its_own) {
  std::mutex mu;
  std::condition_variable cv;
  int changes = 0;
  model_catalog_watch watch(dir_.string(), std::chrono::milliseconds(20), [&] {
    std::lock_guard lk(mu);
    ++changes;
    cv.notify_all();
  });
  EXPECT_TRUE(watch.get()->models().empty());
  link("models/stories260K.gguf", "stories260K.gguf");
  std::unique_lock lk(mu);
  ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return changes > 0; }));
  EXPECT_NE(watch.get()->find("stories260K"), nullptr);
}

TEST(model_file_type_name, names_llama_cpp_file_types) {
  EXPECT_EQ(model_file_type_name(0), "F32");
  EXPECT_EQ(model_file_type_name(1), "F16");
  EXPECT_EQ(model_file_type_name(7), "Q8_0");
  EXPECT_EQ(model_file_type_name(15), "Q4_K_M");
  EXPECT_EQ(model_file_type_name(18), "Q6_K");
  EXPECT_EQ(model_file_type_name(32), "BF16");
  EXPECT_EQ(model_file_type_name(5), "ftype 5");
  EXPECT_EQ(model_file_type_name(999), "ftype 999");
}

}  // namespace
}  // namespace hearth::node
