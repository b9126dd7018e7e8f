#include "node/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/testdata.h"

namespace hearth::node {
namespace {

const std::string k_repo = HEARTH_SOURCE_DIR;

TEST(NodeConfig, TheExampleFileIsValid) {
  node_config cfg;
  auto r = node_config_load(k_repo + "/deploy/node.example.yaml", cfg);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(cfg.models_dir, "/var/lib/hearth/models");
  EXPECT_EQ(cfg.slots, 2u);
  EXPECT_EQ(cfg.engine, "cpu");
  EXPECT_EQ(cfg.backend, gpu::backend_kind::automatic);
  EXPECT_EQ(cfg.device, -1);
  EXPECT_TRUE(cfg.broker_key.empty() && cfg.key.empty());  // commented out: no CURVE
}

TEST(NodeConfig, ReadsTheBackendAndDevice) {
  node_config cfg;
  ASSERT_TRUE(
      node_config_load(testing::write_temp_file("n7.yaml", "backend: vulkan\ndevice: 1\n"), cfg));
  EXPECT_EQ(cfg.backend, gpu::backend_kind::vulkan);
  EXPECT_EQ(cfg.device, 1);
  ASSERT_TRUE(node_config_load(testing::write_temp_file("n7c.yaml", "backend: cuda\n"), cfg));
  EXPECT_EQ(cfg.backend, gpu::backend_kind::cuda);
  auto r = node_config_load(testing::write_temp_file("n8.yaml", "backend: metal\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("backend must be cpu, cuda, vulkan or auto"), std::string::npos)
      << r.message();
  r = node_config_load(testing::write_temp_file("n9.yaml", "device: -2\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("device"), std::string::npos) << r.message();
}

TEST(NodeConfig, ReadsSizesWithUnits) {
  node_config cfg;
  ASSERT_TRUE(node_config_load(
      testing::write_temp_file("n1.yaml", "memory_limit: 12GiB\nslots: 4\n"), cfg));
  EXPECT_EQ(cfg.memory_limit, uint64_t(12) << 30);
  EXPECT_EQ(cfg.slots, 4u);
  // memory_budget, its older name, still reads.
  ASSERT_TRUE(
      node_config_load(testing::write_temp_file("n2.yaml", "memory_budget: 512 MiB\n"), cfg));
  EXPECT_EQ(cfg.memory_limit, uint64_t(512) << 20);
  // Both names at once: which one wins would be a guess.
  auto r = node_config_load(
      testing::write_temp_file("n2b.yaml", "memory_budget: 1GiB\nmemory_limit: 2GiB\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("keep one"), std::string::npos) << r.message();
  EXPECT_EQ(cfg.memory_limit, uint64_t(512) << 20);  // unchanged
}

TEST(NodeConfig, ReadsTheStore) {
  node_config cfg;
  const std::string file = testing::write_temp_file(
      "store.yaml", "store: models-store\nstore_limit: 200GiB\npinned: [llama3, qwen2.5-7b]\n");
  ASSERT_TRUE(node_config_load(file, cfg));
  // Relative to the file's folder, as the keys are.
  EXPECT_EQ(cfg.store, (std::filesystem::path(file).parent_path() / "models-store").string());
  EXPECT_EQ(cfg.store_limit, uint64_t(200) << 30);
  EXPECT_EQ(cfg.pinned, (std::vector<std::string>{"llama3", "qwen2.5-7b"}));
  auto r = node_config_load(testing::write_temp_file("store2.yaml", "pinned: [../x]\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("pinned"), std::string::npos) << r.message();
  r = node_config_load(testing::write_temp_file("store3.yaml", "store_limit: lots\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("store_limit"), std::string::npos) << r.message();
}

TEST(NodeConfig, BadValuesNameTheProblem) {
  node_config cfg;
  auto r = node_config_load(testing::write_temp_file("n3.yaml", "memory_limit: 12 parsecs\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("memory_limit"), std::string::npos) << r.message();
  r = node_config_load(testing::write_temp_file("n4.yaml", "slots: 0\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("slots"), std::string::npos) << r.message();
  r = node_config_load(testing::write_temp_file("n5.yaml", "engine: quantum\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("engine must be cpu or null"), std::string::npos) << r.message();
  r = node_config_load(testing::write_temp_file("n6.yaml", "gpus: 3\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("unknown setting 'gpus'"), std::string::npos) << r.message();
  r = node_config_load(testing::write_temp_file("n7.yaml", "broker: 10.77.0.1:5555\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("did you mean tcp://10.77.0.1:5555?"), std::string::npos)
      << r.message();
}

TEST(NodeConfig, ReadsTheKeysRelativeToTheFile) {
  const std::string dir = ::testing::TempDir() + "node_keys";
  std::filesystem::create_directories(dir + "/conf");
  const std::string path = dir + "/conf/node.yaml";
  std::ofstream(path) << "broker_key: keys/broker.pub\nkey: /etc/hearth/node-a.key\n";
  node_config cfg;
  auto r = node_config_load(path, cfg);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(cfg.broker_key, dir + "/conf/keys/broker.pub");
  EXPECT_EQ(cfg.key, "/etc/hearth/node-a.key");
  std::ofstream(path) << "broker_key: ../broker.pub\nkey: node-a.key\n";
  ASSERT_TRUE(node_config_load(path, cfg));
  EXPECT_EQ(cfg.broker_key, dir + "/broker.pub");
  EXPECT_EQ(cfg.key, dir + "/conf/node-a.key");
}

TEST(NodeConfig, OneKeyWithoutTheOtherIsAnError) {
  node_config cfg;
  auto r =
      node_config_load(testing::write_temp_file("k1.yaml", "broker_key: /k/broker.pub\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("k1.yaml: broker_key is set but not key"), std::string::npos)
      << r.message();
  EXPECT_TRUE(cfg.broker_key.empty());  // a bad file changes nothing
  r = node_config_load(testing::write_temp_file("k2.yaml", "key: /k/node.key\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("key is set but not broker_key"), std::string::npos) << r.message();
  // Flags are checked the same way.
  cfg.key = "node.key";
  r = node_config_check(cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("key is set but not broker_key"), std::string::npos) << r.message();
  cfg.broker_key = "broker.pub";
  EXPECT_TRUE(node_config_check(cfg));
}

}  // namespace
}  // namespace hearth::node
