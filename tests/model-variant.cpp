#include "tests/model-variant.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/io/gguf-split.h"
#include "tests/testdata.h"

namespace hearth::testing {

std::string write_stories_variant(const std::string& name, const model_edit& e) {
  const std::string src = testdata_path("models/stories260K.gguf");
  auto f = gguf_file::open(src);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.message());
  if (!f.ok()) return "";
  gguf_writer w;
  w.copy_metadata_from(*f);
  if (e.metadata) e.metadata(w);
  for (const auto& t : f->tensors()) {
    if (e.tensor && e.tensor(t, w)) continue;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                 std::span(t.data, t.n_bytes));
  }
  const std::string out = ::testing::TempDir() + "hearth_" + name + ".gguf";
  auto r = w.write_file(out);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return out;
}

std::vector<std::string> write_stories_split(const std::string& prefix, uint32_t n_parts) {
  auto f = gguf_file::open(testdata_path("models/stories260K.gguf"));
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.message());
  if (!f.ok() || n_parts == 0) return {};
  std::filesystem::create_directories(std::filesystem::path(prefix).parent_path());
  const auto per_part = uint32_t((f->tensors().size() + n_parts - 1) / n_parts);
  auto r = gguf_split_write(*f, prefix, per_part);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  if (!r.ok()) return {};
  EXPECT_EQ(r->size(), n_parts);
  return std::move(r).value();
}

}  // namespace hearth::testing
