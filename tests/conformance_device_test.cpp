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

#ifdef HEARTH_CONFORMANCE_VULKAN
#include "gpu/vulkan/backend-vulkan.h"
#endif
#ifdef HEARTH_CONFORMANCE_CUDA
#include "gpu/cuda/backend-cuda.h"
#endif

namespace hearth {
namespace {

#ifdef HEARTH_CONFORMANCE_VULKAN
constexpr const char* k_backend = "vulkan";

// Loading on the best Vulkan device; what make_vulkan_backend throws fails the load.
model_params on_device() {
  model_params p;
  p.make_backend = [] { return make_vulkan_backend({}); };
  return p;
}

void require_device() {
  const std::vector<vulkan_device_desc> devices = vulkan_devices();
  if (devices.empty()) testing::skip_all("conformance on Vulkan: no Vulkan device");
  static bool said = false;
  if (!said) {
    said = true;
    const vulkan_device_desc& d = devices.front();
    std::printf("vulkan devices: %zu; first: %s (%s, %s, subgroup arithmetic %s)\n", devices.size(),
                d.name.c_str(), d.vendor.c_str(), d.type.c_str(),
                d.subgroup_arithmetic ? "yes" : "no");
  }
}
#elif defined(HEARTH_CONFORMANCE_CUDA)
constexpr const char* k_backend = "cuda";

// Loading on the CUDA device with the most free memory; what make_cuda_backend throws fails it.
model_params on_device() {
  model_params p;
  p.make_backend = [] { return make_cuda_backend({}); };
  return p;
}

void require_device() {
  const std::vector<cuda::device_desc> devices = cuda::devices();
  if (devices.empty()) testing::skip_all("conformance on CUDA: " + cuda::unavailable_reason());
  static bool said = false;
  if (!said) {
    said = true;
    const cuda::device_desc& d = devices.front();
    std::printf("cuda devices: %zu; first: %s (compute capability %s, %s free)\n", devices.size(),
                d.name.c_str(), cuda::compute_capability(d).c_str(),
                std::to_string(d.memory_free >> 20).append(" MiB").c_str());
  }
}
#else
#error "define the backend under test"
#endif

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
