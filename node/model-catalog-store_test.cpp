// The catalog over a model store (store/README.md) and the models directory: store models served
// from their view with their manifest's source, digest and files; a name in both served from the
// models directory; partial blobs never a model; models-directory files hashed in the background
// into the store's digest cache; evicted "local" models hidden; store models touched.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "node/model-catalog.h"
#include "store/model-store.h"
#include "store/test-store-dir.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;

class model_catalog_store : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = hearth::testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(stories_.empty());
    fs::create_directories(models_dir());
  }
  fs::path models_dir() const { return dir_.path() / "models"; }
  fs::path store_dir() const { return dir_.path() / "store"; }

  // stories260K put into the store as `name`, as `hearth pull` does.
  store::manifest put_stories(store::model_store& st, const std::string& name,
                              bool pinned = false) {
    store::manifest m;
    m.name = name;
    m.kind = "gguf";
    m.source = "hf:karpathy/tinyllamas/stories260K.gguf";
    m.pinned = pinned;
    const std::string digest = store::sha256_file(stories_);
    st.import_file(stories_, digest);
    m.files = {{name + ".gguf", digest, uint64_t(fs::file_size(stories_))}};
    st.put_manifest(m);
    return m;
  }

  model_catalog_sources sources(store::model_store& st) {
    model_catalog_sources src;
    src.models_dir = models_dir().string();
    src.store_views = st.views().string();
    src.manifests = st.list();
    return src;
  }

  store::testing::store_test_dir dir_;
  std::string stories_;
};

TEST_F(model_catalog_store, store_models_are_served_with_their_manifest) {
  store::model_store st(store_dir());
  const auto m = put_stories(st, "tiny", true);
  const auto cat = model_catalog::scan(sources(st));
  const auto* e = cat.find("tiny");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->path, (st.views() / "tiny.gguf").string());
  EXPECT_EQ(e->info.source, m.source);
  EXPECT_EQ(e->info.digest, m.files[0].digest);
  EXPECT_TRUE(e->info.pinned);
  ASSERT_EQ(e->info.files.size(), 1u);
  EXPECT_EQ(e->info.files[0].path, "tiny.gguf");
  EXPECT_EQ(e->info.files[0].size, fs::file_size(stories_));
  EXPECT_EQ(e->info.architecture, "llama");
  EXPECT_EQ(cat.file_by_digest(m.files[0].digest), st.views() / "tiny.gguf");
  EXPECT_TRUE(cat.unhashed().empty());
}

TEST_F(model_catalog_store, a_name_in_both_is_the_models_directorys) {
  store::model_store st(store_dir());
  put_stories(st, "stories");
  fs::create_symlink(stories_, models_dir() / "stories.gguf");
  const auto cat = model_catalog::scan(sources(st));
  ASSERT_EQ(cat.entries().size(), 1u);
  EXPECT_EQ(cat.entries()[0].path, (models_dir() / "stories.gguf").string());
  EXPECT_EQ(cat.entries()[0].info.source, "local");
  EXPECT_EQ(cat.shadowed(), std::vector<std::string>{"stories"});
}

TEST_F(model_catalog_store, a_blob_being_written_is_never_a_model) {
  store::model_store st(store_dir());
  const std::string bytes = hearth::testing::read_file_text(stories_);
  auto blob = st.open_partial(store::sha256_bytes(bytes), bytes.size());
  blob->write(0, bytes.data(), bytes.size());
  blob->mark_done(0, bytes.size());
  auto cat = model_catalog::scan(sources(st));
  EXPECT_TRUE(cat.entries().empty());
  EXPECT_TRUE(cat.errors().empty());
  // Committed, but without a manifest yet: still not a model.
  blob->commit();
  cat = model_catalog::scan(sources(st));
  EXPECT_TRUE(cat.entries().empty());
  // A view whose manifest is gone (a remove killed half-way) is not served either.
  put_stories(st, "gone");
  fs::remove(st.manifest_path("gone"));
  cat = model_catalog::scan(sources(st));
  EXPECT_TRUE(cat.entries().empty());
}

TEST_F(model_catalog_store, models_directory_files_carry_the_digest_caches_digest) {
  store::model_store st(store_dir());
  fs::create_symlink(stories_, models_dir() / "local.gguf");
  store::digest_cache digests(store_dir() / "digests.json");
  auto src = sources(st);
  src.digests = &digests;
  src.pinned = {"local"};
  auto cat = model_catalog::scan(src);
  ASSERT_NE(cat.find("local"), nullptr);
  EXPECT_EQ(cat.find("local")->info.source, "local");
  EXPECT_EQ(cat.find("local")->info.digest, "");  // not hashed yet
  EXPECT_TRUE(cat.find("local")->info.pinned);
  EXPECT_EQ(cat.unhashed(), std::vector<std::string>{(models_dir() / "local.gguf").string()});
  digests.digest(models_dir() / "local.gguf");
  const auto again = model_catalog::scan(src, &cat);
  const std::string digest = store::sha256_file(stories_);
  EXPECT_EQ(again.find("local")->info.digest, digest);
  ASSERT_EQ(again.find("local")->info.files.size(), 1u);
  EXPECT_EQ(again.find("local")->info.files[0].path, "local.gguf");
  EXPECT_TRUE(again.unhashed().empty());
  EXPECT_FALSE(again.same_as(cat));  // the digest is news for the broker
  EXPECT_EQ(again.file_by_digest(digest), models_dir() / "local.gguf");
}

TEST_F(model_catalog_store, the_watch_hashes_in_the_background_and_says_so) {
  fs::copy_file(stories_, models_dir() / "local.gguf");
  std::mutex mu;
  std::condition_variable cv;
  int changes = 0;
  {
    model_catalog_watch watch({models_dir().string(), store_dir().string(), {}, {}}, [&] {
      std::lock_guard lk(mu);
      ++changes;
      cv.notify_all();
    });
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return changes > 0; }));
    EXPECT_EQ(watch.get()->find("local")->info.digest, store::sha256_file(stories_));
  }
  // Kept in the store's digest cache: not hashed again at the next start.
  store::digest_cache digests(store_dir() / "digests.json");
  EXPECT_EQ(digests.known(models_dir() / "local.gguf"), store::sha256_file(stories_));
}

TEST_F(model_catalog_store, an_evicted_local_model_is_hidden_and_a_store_model_touched) {
  store::model_store st(store_dir());
  put_stories(st, "stored");
  fs::create_symlink(stories_, models_dir() / "local.gguf");
  st.touch("stored", 1000);
  int changes = 0;
  model_catalog_watch watch({models_dir().string(), store_dir().string(), {}, {}},
                            [&] { ++changes; });
  EXPECT_FALSE(watch.hide("stored"));  // the store's: removed from the store instead
  EXPECT_FALSE(watch.hide("nothing"));
  EXPECT_TRUE(watch.hide("local"));
  EXPECT_EQ(watch.get()->find("local"), nullptr);
  EXPECT_TRUE(fs::exists(models_dir() / "local.gguf"));
  watch.touch("stored");
  EXPECT_GT(st.find("stored")->last_used_ms, 1000);
  // A store model removed (evicted) is gone at the next rescan.
  ASSERT_TRUE(st.remove("stored"));
  watch.rescan();
  EXPECT_EQ(watch.get()->find("stored"), nullptr);
}

}  // namespace
}  // namespace hearth::node
