// Split GGUF models: stories260K written in 2 and 3 parts as gguf-split writes them opens as the
// same metadata and tensor bytes; a part missing, truncated, of another split, out of place or
// opened instead of the first is refused with an error naming the file (never a crash).
#include "engine/io/gguf-split.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/gguf-writer.h"
#include "tests/gguf-value-diff.h"
#include "tests/model-variant.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class gguf_split : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(path.empty());
    auto f = gguf_file::open(path);
    ASSERT_TRUE(f.ok()) << f.message();
    whole_ = std::move(f).value();
    dir_ = fs::path(::testing::TempDir()) /
           ("hearth_gguf_split_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // stories260K in `n` parts as <dir>/<name>-0000k-of-0000n.gguf; the parts' paths.
  std::vector<std::string> split(const std::string& name, uint32_t n, fs::path dir = {}) {
    return testing::write_stories_split(((dir.empty() ? dir_ : dir) / name).string(), n);
  }

  gguf_file whole_;
  fs::path dir_;
};

TEST(gguf_split_name, parses_what_gguf_split_writes_and_nothing_else) {
  const auto n = gguf_split_name_parse("/m/qwen3-q4_k_m-00002-of-00003.gguf");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->prefix, "/m/qwen3-q4_k_m");
  EXPECT_EQ(n->no, 1u);
  EXPECT_EQ(n->count, 3u);
  EXPECT_EQ(gguf_split_path(n->prefix, 0, 3), "/m/qwen3-q4_k_m-00001-of-00003.gguf");
  for (const char* not_a_part :
       {"/m/model.gguf", "/m/x-00000-of-00003.gguf", "/m/x-00004-of-00003.gguf",
        "/m/x-0001-of-00003.gguf", "/m/x-00001-of-00003.bin", "/m/x-00001_of-00003.gguf",
        "-00001-of-0000a.gguf", "00001-of-00003.gguf"}) {
    EXPECT_FALSE(gguf_split_name_parse(not_a_part)) << not_a_part;
  }
  EXPECT_TRUE(gguf_split_name_parse("-00001-of-00001.gguf"));  // an empty prefix still names it

  EXPECT_EQ(gguf_model_name("/m/qwen3-q4_k_m-00001-of-00003.gguf"), "qwen3-q4_k_m");
  EXPECT_EQ(gguf_model_name("/m/stories260K.gguf"), "stories260K");
  EXPECT_FALSE(gguf_split_is_later_part("/m/x-00001-of-00003.gguf"));
  EXPECT_TRUE(gguf_split_is_later_part("/m/x-00003-of-00003.gguf"));
  EXPECT_FALSE(gguf_split_is_later_part("/m/x.gguf"));
  EXPECT_EQ(gguf_model_paths("/m/x-00001-of-00002.gguf"),
            (std::vector<std::string>{"/m/x-00001-of-00002.gguf", "/m/x-00002-of-00002.gguf"}));
  EXPECT_EQ(gguf_model_paths("/m/x.gguf"), std::vector<std::string>{"/m/x.gguf"});
}

TEST_F(gguf_split, two_and_three_parts_open_as_the_whole_file) {
  for (uint32_t n : {2u, 3u}) {
    SCOPED_TRACE(std::to_string(n) + " parts");
    const auto paths = split("stories-" + std::to_string(n), n);
    ASSERT_EQ(paths.size(), n);
    // As gguf-split writes them: the model's metadata in the first part only, split.* in each.
    uint64_t on_disk = 0;
    size_t tensors_in_parts = 0;
    for (uint32_t k = 0; k < n; ++k) {
      auto part = gguf_file::open(paths[k]);
      ASSERT_TRUE(part.ok()) << part.message();
      EXPECT_EQ(*part->get_uint("split.no").value(), k);
      EXPECT_EQ(*part->get_uint("split.count").value(), n);
      EXPECT_EQ(*part->get_uint("split.tensors.count").value(), whole_.tensors().size());
      EXPECT_EQ(part->find("general.architecture") != nullptr, k == 0);
      EXPECT_EQ(part->metadata().size(), k == 0 ? whole_.metadata().size() + 3 : 3u);
      EXPECT_FALSE(part->tensors().empty());
      tensors_in_parts += part->tensors().size();
      on_disk += fs::file_size(paths[k]);
    }
    EXPECT_EQ(tensors_in_parts, whole_.tensors().size());

    auto m = gguf_model_open(paths[0]);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_EQ(m->paths, paths);
    EXPECT_EQ(m->file_bytes, on_disk);
    // The same metadata (without split.*: the joined file is a whole model) and tensors.
    const auto& kv = m->gguf.metadata();
    ASSERT_EQ(kv.size(), whole_.metadata().size());
    for (size_t i = 0; i < kv.size(); ++i) {
      EXPECT_EQ(kv[i].key, whole_.metadata()[i].key);
      EXPECT_EQ(testing::gguf_value_difference(kv[i].value, whole_.metadata()[i].value), "")
          << kv[i].key;
    }
    ASSERT_EQ(m->gguf.tensors().size(), whole_.tensors().size());
    for (size_t i = 0; i < whole_.tensors().size(); ++i) {
      const gguf_tensor& want = whole_.tensors()[i];
      const gguf_tensor* got = m->gguf.find_tensor(want.name);
      ASSERT_NE(got, nullptr) << want.name;
      EXPECT_EQ(got->type, want.type);
      EXPECT_EQ(got->shape_string(), want.shape_string());
      ASSERT_EQ(got->n_bytes, want.n_bytes);
      EXPECT_EQ(std::memcmp(got->data, want.data, want.n_bytes), 0) << want.name;
    }
    uint64_t last = 0;
    m->gguf.prefetch([&](uint64_t done, uint64_t total) {
      EXPECT_LE(done, total);
      last = done;
    });
    EXPECT_GT(last, 0u);
  }
}

TEST_F(gguf_split, a_whole_file_and_a_split_of_one_open_as_themselves) {
  auto m = gguf_model_open(testing::testdata_path("models/stories260K.gguf"));
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->paths.size(), 1u);
  EXPECT_EQ(m->gguf.tensors().size(), whole_.tensors().size());

  const auto one = split("one", 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(has(one[0], "one-00001-of-00001.gguf"));
  auto single = gguf_model_open(one[0]);
  ASSERT_TRUE(single.ok()) << single.message();
  EXPECT_EQ(single->gguf.tensors().size(), whole_.tensors().size());
}

TEST_F(gguf_split, a_missing_part_is_named) {
  const auto paths = split("s", 3);
  ASSERT_EQ(paths.size(), 3u);
  fs::remove(paths[2]);
  auto m = gguf_model_open(paths[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), paths[2])) << m.message();
  EXPECT_TRUE(has(m.message(), "part 3 of 3")) << m.message();
  EXPECT_TRUE(has(m.message(), "missing")) << m.message();
}

TEST_F(gguf_split, a_part_of_another_split_is_refused) {
  const auto three = split("s", 3);
  // Part 2 of a split in two, given the name of part 2 of the split in three.
  const auto two = split("s", 2, dir_ / "other");
  ASSERT_EQ(three.size(), 3u);
  ASSERT_EQ(two.size(), 2u);
  fs::copy_file(two[1], three[1], fs::copy_options::overwrite_existing);
  auto m = gguf_model_open(three[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), three[1])) << m.message();
  EXPECT_TRUE(has(m.message(), "split.count is 2")) << m.message();

  // Part 2 of another split in three whose parts hold other tensors: one of them is twice.
  const fs::path other = dir_ / "other3";
  fs::create_directories(other);
  const uint32_t per_part = uint32_t((whole_.tensors().size() + 2) / 3) + 2;
  auto shifted = gguf_split_write(whole_, (other / "s").string(), per_part);
  ASSERT_TRUE(shifted.ok()) << shifted.message();
  ASSERT_EQ(shifted->size(), 3u);
  const auto fresh = split("t", 3);
  const size_t shifted_last = gguf_file::open((*shifted)[2])->tensors().size();
  fs::copy_file((*shifted)[2], fresh[2], fs::copy_options::overwrite_existing);
  m = gguf_model_open(fresh[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), "split.tensors.count is " + std::to_string(whole_.tensors().size()) +
                                   ", but the parts hold"))
      << m.message();
  EXPECT_TRUE(has(m.message(), fresh[2] + ": " + std::to_string(shifted_last))) << m.message();
}

TEST_F(gguf_split, parts_out_of_place_are_refused) {
  const auto paths = split("s", 3);
  ASSERT_EQ(paths.size(), 3u);
  // Parts 2 and 3 swapped: part 2's file says split.no 2.
  const std::string tmp = (dir_ / "swap").string();
  fs::rename(paths[1], tmp);
  fs::rename(paths[2], paths[1]);
  fs::rename(tmp, paths[2]);
  auto m = gguf_model_open(paths[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), paths[1])) << m.message();
  EXPECT_TRUE(has(m.message(), "split.no is 2")) << m.message();
}

TEST_F(gguf_split, a_later_part_or_a_renamed_first_part_says_what_to_open) {
  const auto paths = split("s", 3);
  ASSERT_EQ(paths.size(), 3u);
  auto m = gguf_model_open(paths[1]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), "is part 2 of 3 of a split model: open " + paths[0])) << m.message();

  const std::string renamed = (dir_ / "renamed.gguf").string();
  fs::copy_file(paths[0], renamed);
  m = gguf_model_open(renamed);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), renamed)) << m.message();
  EXPECT_TRUE(has(m.message(), "not named PREFIX-00001-of-00003.gguf")) << m.message();
}

// Every truncation of a part, and garbage in its place: an error naming that part, no crash
// (the AddressSanitizer build runs this too).
TEST_F(gguf_split, a_truncated_or_garbage_part_is_an_error_naming_it) {
  const auto paths = split("s", 2);
  ASSERT_EQ(paths.size(), 2u);
  const std::vector<uint8_t> bytes = testing::read_file_bytes(paths[1]);
  ASSERT_GT(bytes.size(), 64u);
  // Short of the last 32 bytes: those may be the last tensor's padding, which it does not need.
  for (size_t len = 0; len + 32 <= bytes.size(); len += len < 512 ? 1 : 997) {
    fs::resize_file(paths[1], len);
    auto m = gguf_model_open(paths[0]);
    ASSERT_FALSE(m.ok()) << len << " bytes";
    EXPECT_TRUE(has(m.message(), paths[1])) << m.message();
  }
  {
    std::vector<uint8_t> garbage(bytes.size(), 0x5a);
    std::FILE* f = std::fopen(paths[1].c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(garbage.data(), 1, garbage.size(), f);
    std::fclose(f);
  }
  auto m = gguf_model_open(paths[0]);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has(m.message(), paths[1]) && has(m.message(), "not a GGUF file")) << m.message();
}

// Parts written by hand: `names` tensors of 32 F32 each, with the split keys given.
std::vector<uint8_t> part_bytes(int64_t no, int64_t count, int64_t total,
                                const std::vector<std::string>& names) {
  gguf_writer w;
  if (no >= 0) w.set_u16("split.no", uint16_t(no));
  if (count >= 0) w.set_u16("split.count", uint16_t(count));
  if (total >= 0) w.set_i32("split.tensors.count", int32_t(total));
  const std::vector<uint8_t> zeros(32 * 4, 0);
  for (const auto& n : names) w.add_tensor(n, tensor_type::f32, {32}, zeros);
  return w.to_bytes();
}

TEST(gguf_split_join, checks_the_split_keys_and_the_tensors_across_parts) {
  struct join_case {
    const char* what;
    std::vector<std::vector<uint8_t>> parts;
    const char* error;  // nullptr: joins
  };
  const std::vector<join_case> cases = {
      {"fine", {part_bytes(0, 2, 3, {"a", "b"}), part_bytes(1, 2, 3, {"c"})}, nullptr},
      {"a tensor twice",
       {part_bytes(0, 2, 3, {"a", "b"}), part_bytes(1, 2, 3, {"b"})},
       "p1: tensor 'b' is also in p0"},
      {"too few tensors",
       {part_bytes(0, 2, 4, {"a", "b"}), part_bytes(1, 2, 4, {"c"})},
       "split.tensors.count is 4, but the parts hold 3"},
      {"too many tensors",
       {part_bytes(0, 2, 2, {"a", "b"}), part_bytes(1, 2, 2, {"c"})},
       "more than the 2 tensors"},
      {"another total",
       {part_bytes(0, 2, 3, {"a", "b"}), part_bytes(1, 2, 5, {"c"})},
       "p1: split.tensors.count is 5, but the first part says 3"},
      {"no split.no",
       {part_bytes(0, 2, 3, {"a"}), part_bytes(-1, 2, 3, {"b", "c"})},
       "no split.no"},
      {"no split.count",
       {part_bytes(0, -1, 3, {"a"}), part_bytes(1, 2, 3, {"b"})},
       "no split.count"},
      {"no total", {part_bytes(0, 2, -1, {"a"}), part_bytes(1, 2, -1, {"b"})}, "no split.tensors"},
      {"wrong place", {part_bytes(0, 2, 2, {"a"}), part_bytes(0, 2, 2, {"b"})}, "split.no is 0"},
  };
  for (const auto& c : cases) {
    std::vector<gguf_file> parts;
    std::vector<std::string> names;
    for (const auto& b : c.parts) {
      auto p = gguf_file::parse(b);
      ASSERT_TRUE(p.ok()) << c.what << ": " << p.message();
      parts.push_back(std::move(p).value());
      names.push_back("p" + std::to_string(names.size()));
    }
    auto joined = gguf_split_join(std::move(parts), names);
    if (!c.error) {
      ASSERT_TRUE(joined.ok()) << c.what << ": " << joined.message();
      EXPECT_EQ(joined->tensors().size(), 3u);
      EXPECT_EQ(joined->find("split.count"), nullptr);
    } else {
      ASSERT_FALSE(joined.ok()) << c.what;
      EXPECT_TRUE(has(joined.message(), c.error)) << c.what << ": " << joined.message();
    }
  }
  EXPECT_FALSE(gguf_split_join({}, {}).ok());
}

TEST_F(gguf_split, a_folder_of_one_split_names_its_first_part) {
  const auto paths = split("s", 3, dir_ / "view");
  ASSERT_EQ(paths.size(), 3u);
  EXPECT_EQ(gguf_split_first_part_in((dir_ / "view").string()), paths[0]);
  split("t", 2, dir_ / "view");  // a second model: which one the folder is would be a guess
  EXPECT_FALSE(gguf_split_first_part_in((dir_ / "view").string()));
  EXPECT_FALSE(gguf_split_first_part_in((dir_ / "nowhere").string()));
}

TEST_F(gguf_split, writing_refuses_zero_tensors_a_part_and_leaves_nothing_on_failure) {
  EXPECT_FALSE(gguf_split_write(whole_, (dir_ / "z").string(), 0).ok());
  auto r = gguf_split_write(whole_, (dir_ / "no" / "such" / "dir" / "z").string(), 10);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has(r.message(), "no/such/dir")) << r.message();
  EXPECT_TRUE(fs::is_empty(dir_));
}

}  // namespace
}  // namespace hearth
