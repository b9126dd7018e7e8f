// End-to-end conformance on the Vulkan backend: every model file of the test data loaded onto
// Vulkan (never falling back to the CPU: a file Vulkan cannot run fails) within the CPU
// conformance bounds (tests/conformance.h), and stories260K's greedy continuations token for
// token. Without any Vulkan device the whole binary is reported skipped.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/context.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "gpu/vulkan/backend-vulkan.h"
#include "tests/conformance.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

// Loading on the best Vulkan device; what make_vulkan_backend throws fails the load.
model_params on_vulkan() {
  model_params p;
  p.make_backend = [] { return make_vulkan_backend({}); };
  return p;
}

void require_vulkan() {
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

class conformance_vulkan : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { require_vulkan(); }
};

TEST_P(conformance_vulkan, logits_match_reference_within_bounds) {
  testing::check_logits_conformance(GetParam(), on_vulkan(), "vulkan");
}

INSTANTIATE_TEST_SUITE_P(all, conformance_vulkan,
                         ::testing::ValuesIn(testing::conformance_reference_files()),
                         [](const auto& param_info) {
                           return testing::conformance_case_name(param_info.param);
                         });

class stories_vulkan : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { require_vulkan(); }
};

TEST_F(stories_vulkan, greedy_continuations_match_the_reference_token_for_token) {
  const std::string path = testing::testdata_path("models/stories260K.gguf");
  const std::string ref_path = testing::testdata_path("reference/stories260K.json");
  ASSERT_FALSE(path.empty() || ref_path.empty());
  const auto ref = nlohmann::json::parse(testing::read_file_text(ref_path));
  auto m = model::load(path, on_vulkan());
  ASSERT_EQ(m->backend().name(), "vulkan");
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
