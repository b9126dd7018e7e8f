// The GPU backends are modules loaded at run time (backends/modules.h): a node whose CUDA module
// cannot load — its libraries missing (as on a machine without libcublas.so.13 or the NVIDIA
// driver), or the module absent — still starts, says at start why CUDA was not loaded, and serves
// jobs on the CPU; `hearth devices` says the same. The broken module is
// backends/module-fixture.cpp, built as libhearth-cuda.so needing a library no loader can find.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

using testing::cluster;
using testing::test_client;
using testing::wait_until;

class backend_modules : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(stories_.empty());
    reference_ = nlohmann::json::parse(
        testing::read_file_text(testing::testdata_path("reference/stories260K.json")));
  }
  void TearDown() override { unsetenv("HEARTH_BACKEND_PATH"); }

  // A folder of modules for the processes started next: `cuda_module` copied in as
  // libhearth-cuda.so when not empty, nothing else.
  std::string module_dir(const std::string& cuda_module) {
    const std::string dir = c_.dir().file("modules");
    std::filesystem::create_directories(dir);
    if (!cuda_module.empty()) std::filesystem::copy_file(cuda_module, dir + "/libhearth-cuda.so");
    setenv("HEARTH_BACKEND_PATH", dir.c_str(), 1);
    return dir;
  }

  // Starts a broker and a node (backend auto, as a node is configured by default), checks that
  // the node's start log has `why_cuda` and serves stories260K on the CPU with the reference text.
  void node_serves_on_the_cpu(const std::string& why_cuda) {
    auto broker = c_.start_broker();
    const std::string models = c_.dir().file("models");
    testing::link_model(models, "stories260K", stories_);
    auto node = c_.start_node("n1", models, "cpu", 1, {"--backend", "auto"});
    auto client_ptr = c_.client();
    auto& client = *client_ptr;
    std::optional<wire::nodes_reply> nodes;
    ASSERT_TRUE(wait_until([&] {
      nodes = client.request<wire::nodes_reply>(wire::list_nodes{});
      return nodes && !nodes->nodes.empty() && nodes->nodes[0].online;
    })) << broker.log()
        << node.log();
    EXPECT_EQ(nodes->nodes[0].engine, "cpu");
    for (const auto& g : nodes->nodes[0].hardware.gpus) EXPECT_NE(g.backend, "cuda");

    const auto& kase = reference_["cases"][0];
    ASSERT_NO_FATAL_FAILURE(testing::expect_greedy_text(
        client, "stories260K", kase["prompt"], kase["greedy_text"], [&] { return node.log(); }));

    const std::string log = node.log();
    EXPECT_NE(log.find("backend cpu: loaded, 1 device"), std::string::npos) << log;
    EXPECT_NE(log.find("backend cuda: not loaded: "), std::string::npos) << log;
    EXPECT_NE(log.find(why_cuda), std::string::npos) << log;
    EXPECT_NE(log.find("backend vulkan: not loaded: libhearth-vulkan.so not found"),
              std::string::npos)
        << log;
  }

  // `hearth devices --json` in the same setting: the CUDA entry, not loaded, and why.
  std::string devices_reason(const std::string& backend) {
    const std::string log = c_.dir().file("devices.log");
    auto p = testing::spawn({HEARTH_BIN, "devices", "--json"}, log);
    EXPECT_EQ(p.wait(), 0) << p.log();
    const std::string text = p.log();
    const auto j = nlohmann::json::parse(text.substr(text.find('{')));
    for (const auto& b : j["backends"]) {
      if (b["name"] != backend) continue;
      EXPECT_FALSE(b["loaded"].get<bool>()) << b.dump();
      return b["reason"];
    }
    ADD_FAILURE() << "no " << backend << " in " << text;
    return "";
  }

  std::string stories_;
  nlohmann::json reference_;
  cluster c_;
};

TEST_F(backend_modules, the_cuda_modules_libraries_missing_the_node_serves_on_the_cpu) {
  module_dir(std::string(HEARTH_FIXTURE_MODULES) + "/unresolvable/libhearth-cuda.so");
  const std::string why = "libhearth_fixture_hidden.so: cannot open shared object file";
  node_serves_on_the_cpu(why);
  EXPECT_NE(devices_reason("cuda").find(why), std::string::npos);
}

TEST_F(backend_modules, the_cuda_module_absent_the_node_serves_on_the_cpu) {
  const std::string dir = module_dir("");
  const std::string why = "libhearth-cuda.so not found (looked in " + dir + ")";
  node_serves_on_the_cpu(why);
  EXPECT_EQ(devices_reason("cuda"), why);
}

}  // namespace
}  // namespace hearth
