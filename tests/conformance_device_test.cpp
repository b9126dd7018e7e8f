// End-to-end conformance on a device backend: every model file of the test data loaded onto the
// device (never falling back to the CPU: a file the device cannot run fails) within the CPU
// conformance bounds (tests/conformance.h), and stories260K's greedy continuations token for
// token. Built once per backend (tests/device-backend.h); without a device of that backend the
// whole binary is reported skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "fixtures/random-model.h"
#include "tests/conformance.h"
#include "tests/device-backend.h"
#include "tests/testdata.h"

#include "backends/registry.h"

namespace hearth {
namespace {

constexpr gpu::backend_kind k_kind = testing::device_backend_kind;
const char* const k_backend = gpu::backend_kind_name(k_kind);
using testing::on_device;

void require_device() {
  const std::string why = gpu::device_registry().why_no_device(k_kind);
  if (!why.empty()) testing::skip_all(std::string("conformance on ") + k_backend + ": " + why);
  static bool said = false;
  if (!said) {
    said = true;
    gpu::device d;
    const gpu::backend_entry* e = nullptr;
    gpu::device_registry().best(k_kind, d, e);
    std::printf("%s device: %s (%s, %s, %s)\n", k_backend, d.name.c_str(), d.vendor.c_str(),
                gpu::device_type_name(d.type), d.detail.c_str());
  }
}

class conformance_device : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { require_device(); }
};

TEST_P(conformance_device, logits_match_reference_within_bounds) {
  testing::check_logits_conformance(GetParam(), on_device(), k_backend);
}

INSTANTIATE_TEST_SUITE_P(all, conformance_device,
                         ::testing::ValuesIn(testing::conformance_reference_files()),
                         [](const auto& param_info) {
                           return testing::conformance_case_name(param_info.param);
                         });

class stories_device : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { require_device(); }
};

TEST_F(stories_device, greedy_continuations_match_the_reference_token_for_token) {
  const std::string path = testing::testdata_path("models/stories260K.gguf");
  const std::string ref_path = testing::testdata_path("reference/stories260K.json");
  ASSERT_FALSE(path.empty() || ref_path.empty());
  const auto ref = nlohmann::json::parse(testing::read_file_text(ref_path));
  auto m = model::load(path, on_device());
  ASSERT_EQ(m->backend().name(), k_backend);
  context ctx(*m, {.n_ctx = 128});
  for (const auto& c : ref["cases"]) {
    const auto prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_reference(ctx, prompt, c));
  }
}

// Llama 3.2 1B's shapes, one block, Q4_0: the embedding table, which is the output projection too
// (tied), is 128,256 rows of 2,048 values (Q6_K, as llama-quantize keeps it: 215 MB), and one
// token's logits 128,256 floats, so 270 tokens' logits pass 128 MiB: both more than one buffer
// holds on lavapipe and on some ARM GPUs. The table is then held in row parts and the context fills
// fewer logits rows per pass (261 there). 270 tokens, each wanting its logits, run on the device
// and on the CPU backend; every row within the Q4_0 conformance bounds. Skipped where the device
// holds both in one buffer each.
TEST(large_tensors_device, a_table_and_logits_larger_than_one_buffer_match_the_cpu) {
  require_device();
  const model_shape* shape = model_shape_find("llama-3.2-1b");
  ASSERT_NE(shape, nullptr);
  const std::string path =
      (std::filesystem::temp_directory_path() / "hearth-large-tensors.q4_0.gguf").string();
  random_model_options o;
  o.type = file_type::q4_0;
  o.n_layer = 1;
  o.testdata_root = testing::testdata_root();
  auto written = random_model_write(*shape, o, path);
  ASSERT_TRUE(written.ok()) << written.message();
  struct remove_after {
    std::string path;
    ~remove_after() { std::filesystem::remove(path); }
  } cleanup{path};

  auto dev = model::load(path, on_device());
  ASSERT_EQ(dev->backend().name(), k_backend);
  const gguf_tensor* table = dev->file().find_tensor("token_embd.weight");
  ASSERT_NE(table, nullptr);
  const uint64_t limit = dev->backend().max_alloc_bytes();
  const int32_t n_vocab = dev->hparams().n_vocab;
  constexpr int32_t k_tokens = 270;
  if (table->n_bytes <= limit && uint64_t(n_vocab) * 4 * k_tokens <= limit)
    GTEST_SKIP() << "one buffer holds " << limit << " bytes on this device: no part is needed";
  auto cpu = model::load(path, model_params{});

  std::mt19937 rng(7);
  std::vector<batch_token> batch;
  for (int32_t i = 0; i < k_tokens; ++i)
    batch.push_back({int32_t(rng() % uint32_t(n_vocab)), i, 0, true});
  auto logits_of = [&](const model& m) {
    context ctx(m, {.n_ctx = 512});
    auto r = ctx.decode(batch);
    EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(ctx.n_logits(), k_tokens);
    return std::vector<float>(ctx.logits(0), ctx.logits(0) + size_t(k_tokens) * n_vocab);
  };
  const std::vector<float> got = logits_of(*dev), want = logits_of(*cpu);
  ASSERT_EQ(got.size(), want.size());

  const testing::conformance_bounds b = testing::conformance_bounds_for(path);
  double worst = 0, sum = 0;
  int argmax_same = 0;
  for (int32_t t = 0; t < k_tokens; ++t) {
    const float* g = got.data() + size_t(t) * n_vocab;
    const float* w = want.data() + size_t(t) * n_vocab;
    double err = 0, norm = 0;
    for (int32_t v = 0; v < n_vocab; ++v) {
      err += (double(g[v]) - w[v]) * (double(g[v]) - w[v]);
      norm += double(w[v]) * w[v];
    }
    const double nmse = err / norm;
    EXPECT_LE(nmse, b.worst_nmse) << "token " << t;
    worst = std::max(worst, nmse);
    sum += nmse;
    argmax_same += std::max_element(g, g + n_vocab) - g == std::max_element(w, w + n_vocab) - w;
  }
  const double share = double(argmax_same) / k_tokens;
  std::printf(
      "%s, one buffer %llu bytes: table %llu bytes, %d tokens' logits %llu bytes; worst "
      "NMSE %.3e, mean %.3e, argmax same %.3f\n",
      k_backend, (unsigned long long)limit, (unsigned long long)table->n_bytes, k_tokens,
      (unsigned long long)(uint64_t(n_vocab) * 4 * k_tokens), worst, sum / k_tokens, share);
  EXPECT_LE(sum / k_tokens, b.mean_nmse);
  if (b.argmax_share > 0) {
    EXPECT_GE(share, b.argmax_share);
  }
}

}  // namespace
}  // namespace hearth
