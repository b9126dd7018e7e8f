// Which model a completion may be submitted for (404 unknown, 503 no node online), and the
// OpenAI model object with hearth's fields.
#include "gateway/model-catalog.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hearth::gateway {
namespace {

using json = nlohmann::json;

wire::model_summary model(std::string name, std::vector<std::string> nodes) {
  wire::model_summary m;
  m.name = std::move(name);
  m.architecture = "llama";
  m.quantization = "F32";
  m.size_bytes = 1105920;
  m.context_length = 512;
  m.nodes = std::move(nodes);
  return m;
}

wire::models_reply list(std::vector<wire::model_summary> models, bool truncated = false) {
  wire::models_reply r;
  r.total = uint32_t(models.size());
  r.models = std::move(models);
  r.truncated = truncated;
  return r;
}

TEST(ModelCatalog, AModelSomeOnlineNodeServesCanBeSubmitted) {
  EXPECT_EQ(model_unavailable(list({model("stories", {"desk"})}), "stories"), std::nullopt);
}

TEST(ModelCatalog, AnUnknownModelIsA404NamingTheKnownOnes) {
  auto e = model_unavailable(list({model("stories", {"desk"}), model("qwen", {})}), "llama");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  auto err = json::parse(e->body)["error"];
  EXPECT_EQ(err["message"], "model 'llama' is not served by any node; known models: stories, qwen");
  EXPECT_EQ(err["param"], "model");
  EXPECT_EQ(err["code"], "model_not_found");
  e = model_unavailable(list({}), "llama");
  EXPECT_EQ(json::parse(e->body)["error"]["message"],
            "model 'llama' is not served by any node; known models: none");
}

TEST(ModelCatalog, AModelWhoseNodesAreAllOfflineIsA503) {
  auto e = model_unavailable(list({model("qwen", {})}), "qwen");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 503);
  EXPECT_EQ(json::parse(e->body)["error"]["message"],
            "model 'qwen' is known, but no node that serves it is online; retry later");
}

TEST(ModelCatalog, AListCutShortLeavesTheDecisionToTheBroker) {
  EXPECT_EQ(model_unavailable(list({model("a", {"n"})}, true), "b"), std::nullopt);
}

TEST(ModelCatalog, ALongListOfNamesIsCut) {
  std::vector<wire::model_summary> many;
  for (int i = 0; i < 40; ++i) many.push_back(model("m" + std::to_string(i), {}));
  const std::string names = model_names(list(many));
  EXPECT_TRUE(names.starts_with("m0, m1, "));
  EXPECT_TRUE(names.ends_with("m31 and 8 more")) << names;
}

TEST(ModelCatalog, TheModelObjectIsOpenaisWithHearthsFields) {
  auto m = model("stories", {"desk", "laptop"});
  m.loaded_on = {"desk"};
  m.queued = 2;
  EXPECT_EQ(json_text(openai_model_json(m)),
            R"({"id":"stories","object":"model","created":0,"owned_by":"hearth",)"
            R"("nodes":["desk","laptop"],"loaded_on":["desk"],"context_length":512,)"
            R"("architecture":"llama","quantization":"F32","size_bytes":1105920,"queued":2})");
}

}  // namespace
}  // namespace hearth::gateway
