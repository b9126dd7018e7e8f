#include "gateway/config.h"

#include <gtest/gtest.h>

#include "tests/testdata.h"

namespace hearth::gateway {
namespace {

const std::string k_repo = HEARTH_SOURCE_DIR;

TEST(GatewayConfig, TheExampleFileIsValidAndSaysTheDefaults) {
  gateway_config cfg;
  auto r = gateway_config_load(k_repo + "/deploy/gateway.example.yaml", cfg);
  ASSERT_TRUE(r) << r.message();
  const gateway_options defaults;
  EXPECT_EQ(cfg.options.listen, defaults.listen);
  EXPECT_EQ(cfg.options.broker, defaults.broker);
  EXPECT_EQ(cfg.options.max_body_bytes, defaults.max_body_bytes);
  EXPECT_EQ(cfg.options.max_upload_bytes, defaults.max_upload_bytes);
  EXPECT_EQ(cfg.options.max_batch_output_bytes, defaults.max_batch_output_bytes);
  EXPECT_EQ(cfg.options.max_connections, defaults.max_connections);
  EXPECT_EQ(cfg.options.max_connections_per_address, defaults.max_connections_per_address);
  EXPECT_EQ(cfg.options.header_timeout, defaults.header_timeout);
  EXPECT_EQ(cfg.options.headers_timeout, defaults.headers_timeout);
  EXPECT_TRUE(cfg.options.allowed_hosts.empty());
  EXPECT_EQ(cfg.options.idle_timeout, defaults.idle_timeout);
  EXPECT_EQ(cfg.options.write_timeout, defaults.write_timeout);
  EXPECT_EQ(cfg.options.max_unsent_bytes, defaults.max_unsent_bytes);
  EXPECT_FALSE(cfg.options.insecure);
  EXPECT_TRUE(cfg.options.cors_origins.empty());
  EXPECT_TRUE(cfg.options.broker_key.empty() && cfg.options.key.empty());
  EXPECT_EQ(cfg.options.db, k_repo + "/deploy/gateway.db");  // beside the file
}

TEST(GatewayConfig, ReadsListsDurationsAndPathsBesideTheFile) {
  gateway_config cfg;
  auto r = gateway_config_load(
      testing::write_temp_file(
          "g1.yaml",
          "listen: 0.0.0.0:9000\ncors: [https://a.example, https://b.example]\n"
          "idle_timeout_ms: 1500\nbroker_key: keys/broker.pub\nkey: /abs/gw.key\n"
          "allowed_hosts: [hub, \"nas:8080\"]\n"),
      cfg);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(cfg.options.allowed_hosts, (std::vector<std::string>{"hub", "nas:8080"}));
  EXPECT_EQ(cfg.options.listen, "0.0.0.0:9000");
  EXPECT_EQ(cfg.options.cors_origins,
            (std::vector<std::string>{"https://a.example", "https://b.example"}));
  EXPECT_EQ(cfg.options.idle_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(cfg.options.broker_key, ::testing::TempDir() + "keys/broker.pub");
  EXPECT_EQ(cfg.options.key, "/abs/gw.key");
}

TEST(GatewayConfig, BadFilesAreErrorsNamingTheKeyAndChangeNothing) {
  struct bad {
    std::string yaml, says;
  };
  for (const auto& b : {bad{"listn: 1.2.3.4:5\n", "unknown setting 'listn'"},
                        bad{"max_connections: many\n", "'max_connections' has the wrong type"},
                        bad{"broker: 127.0.0.1:5555\n", "expected tcp://HOST:PORT"},
                        bad{"idle_timeout_ms: 5\n", "idle_timeout_ms must be at least 100"},
                        bad{"max_body_bytes: 10\n", "max_body_bytes must be at least 1024"},
                        bad{"max_upload_bytes: 4294967297\nmax_total_body_bytes: 8589934592\n",
                            "max_upload_bytes is 4294967297, at most 1000000000"},
                        bad{"max_batch_output_bytes: 1000000001\n",
                            "max_batch_output_bytes is 1000000001, expected 1 to 1000000000"},
                        bad{"max_batch_output_bytes: 0\n", "max_batch_output_bytes is 0"},
                        bad{"log_level: loud\n", "log_level must be one of"},
                        bad{"cors: 7\n", "'cors' has the wrong type"}}) {
    gateway_config cfg;
    cfg.options.listen = "untouched:1";
    auto r = gateway_config_load(
        testing::write_temp_file("gbad.yaml", "listen: 1.2.3.4:5\n" + b.yaml), cfg);
    ASSERT_FALSE(r) << b.yaml;
    EXPECT_NE(r.message().find(b.says), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("gbad.yaml"), std::string::npos) << r.message();
    EXPECT_EQ(cfg.options.listen, "untouched:1");
  }
}

TEST(GatewayConfig, LoopbackListenAddresses) {
  for (const char* yes : {"127.0.0.1:8080", "127.1.2.3:0", "localhost:80", "[::1]:8080"}) {
    EXPECT_TRUE(listen_is_loopback(yes)) << yes;
  }
  for (const char* no : {"0.0.0.0:8080", "192.168.1.2:8080", "[::]:8080", "example.org:80", ":8080",
                         "8080", "[::1]8080", "::1:8080"}) {
    EXPECT_FALSE(listen_is_loopback(no)) << no;
  }
}

}  // namespace
}  // namespace hearth::gateway
