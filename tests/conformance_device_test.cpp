// End-to-end conformance on a device backend: every model file of the test data loaded onto the
// device (never falling back to the CPU: a file the device cannot run fails) within the CPU
// conformance bounds (tests/conformance.h), and stories260K's greedy continuations token for
// token. Built once per backend (HEARTH_CONFORMANCE_VULKAN, HEARTH_CONFORMANCE_CUDA); without a
// device of that backend the whole binary is reported skipped.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "tests/conformance.h"
#include "tests/testdata.h"

#include "gpu/registry.h"

namespace hearth {
namespace {

#ifdef HEARTH_CONFORMANCE_VULKAN
constexpr gpu::backend_kind k_kind = gpu::backend_kind::vulkan;
#elif defined(HEARTH_CONFORMANCE_CUDA)
constexpr gpu::backend_kind k_kind = gpu::backend_kind::cuda;
#else
#error "define the backend under test"
#endif
const char* const k_backend = gpu::backend_kind_name(k_kind);

// Loading on the backend's best device, from its module through the device registry; what the
// backend throws fails the load.
model_params on_device() {
  model_params p;
  p.make_backend = []() -> std::unique_ptr<backend> {
    gpu::device d;
    const gpu::backend_entry* e = nullptr;
    if (!gpu::device_registry().best(k_kind, d, e))
      throw std::runtime_error(std::string(k_backend) + ": no device");
    return e->make(d.index);
  };
  return p;
}

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
    sampler smp({.temperature = 0}, ctx.n_vocab());
    auto g = generate(ctx, prompt, smp, {.max_tokens = 64}, nullptr);
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_EQ(g->tokens, c["greedy_tokens"].get<std::vector<int32_t>>()) << c["prompt"];
    EXPECT_EQ(g->text, c["greedy_text"].get<std::string>()) << c["prompt"];
    EXPECT_EQ(g->reason, stop_reason::max_tokens);
  }
}

}  // namespace
}  // namespace hearth
