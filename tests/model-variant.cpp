#include "tests/model-variant.h"

#include <gtest/gtest.h>

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

}  // namespace hearth::testing
