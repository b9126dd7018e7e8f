#include "broker/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/testdata.h"

namespace hearth::broker {
namespace {

const std::string k_repo = HEARTH_SOURCE_DIR;

TEST(BrokerConfig, TheExampleFileHoldsTheDefaults) {
  broker_config cfg;
  auto r = broker_config_load(k_repo + "/deploy/broker.example.yaml", cfg);
  ASSERT_TRUE(r) << r.message();
  const broker_config defaults;
  EXPECT_EQ(cfg.bind, defaults.bind);
  EXPECT_EQ(cfg.heartbeat_ms, defaults.heartbeat_ms);
  EXPECT_EQ(cfg.liveness, defaults.liveness);
  EXPECT_EQ(cfg.max_attempts, defaults.max_attempts);
  EXPECT_EQ(cfg.output_flush_ms, defaults.output_flush_ms);
  EXPECT_EQ(cfg.max_node_slots, defaults.max_node_slots);
  EXPECT_EQ(cfg.quarantine_after, defaults.quarantine_after);
  EXPECT_EQ(cfg.quarantine_window_ms, defaults.quarantine_window_ms);
  EXPECT_EQ(cfg.quarantine_ms, defaults.quarantine_ms);
  EXPECT_EQ(cfg.max_nodes, defaults.max_nodes);
  EXPECT_EQ(cfg.hello_rate_per_peer, defaults.hello_rate_per_peer);
  EXPECT_EQ(cfg.hello_burst_per_peer, defaults.hello_burst_per_peer);
  EXPECT_EQ(cfg.hello_rate, defaults.hello_rate);
  EXPECT_EQ(cfg.hello_burst, defaults.hello_burst);
  EXPECT_EQ(cfg.max_peer_outbox_bytes, defaults.max_peer_outbox_bytes);
  EXPECT_EQ(cfg.peer_stall_ms, defaults.peer_stall_ms);
  EXPECT_EQ(cfg.max_outbox_bytes, defaults.max_outbox_bytes);
  EXPECT_EQ(cfg.max_client_queued_jobs, defaults.max_client_queued_jobs);
  EXPECT_EQ(cfg.max_client_queued_bytes, defaults.max_client_queued_bytes);
  EXPECT_EQ(cfg.max_queue_bytes, defaults.max_queue_bytes);
  EXPECT_EQ(cfg.durability, defaults.durability);
  EXPECT_EQ(cfg.max_output_bytes, defaults.max_output_bytes);
  EXPECT_EQ(cfg.retention_max_age_days, defaults.retention_max_age_days);
  EXPECT_EQ(cfg.retention_keep_last, defaults.retention_keep_last);
}

TEST(BrokerConfig, DurabilityOutputCapAndRetentionAreReadAndChecked) {
  broker_config cfg;
  auto r = broker_config_load(
      testing::write_temp_file("b16.yaml",
                               "durability: normal\nmax_output_bytes: 1048576\n"
                               "retention:\n  max_age_days: 30\n  keep_last: 5000\n"),
      cfg);
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(cfg.durability, "normal");
  EXPECT_EQ(broker_store_options(cfg).sync, store_options::durability::normal);
  EXPECT_EQ(cfg.max_output_bytes, 1048576u);
  EXPECT_EQ(broker_retention(cfg).max_age_ms, uint64_t(30) * 24 * 3600 * 1000);
  EXPECT_EQ(broker_retention(cfg).keep_last, 5000u);
  EXPECT_EQ(broker_store_options(broker_config{}).sync, store_options::durability::full);
  for (auto [bad, says] : {std::pair{"durability: fast\n", "durability must be full or normal"},
                           {"max_output_bytes: 10\n", "max_output_bytes"},
                           {"retention: 30\n", "'retention' must be a map"},
                           {"retention:\n  max_age: 30\n", "unknown setting 'retention.max_age'"},
                           {"retention:\n  keep_last: lots\n", "keep_last"}}) {
    broker_config c;
    auto e = broker_config_load(testing::write_temp_file("b16bad.yaml", bad), c);
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.message().find(says), std::string::npos) << e.message();
  }
}

TEST(BrokerConfig, NodeBoundsAreReadAndChecked) {
  broker_config cfg;
  ASSERT_TRUE(broker_config_load(
      testing::write_temp_file("b6.yaml",
                               "max_node_slots: 8\nquarantine_after: 2\nquarantine_ms: 5000\n"
                               "max_nodes: 10\nhello_rate: 7\n"),
      cfg));
  EXPECT_EQ(cfg.max_node_slots, 8u);
  EXPECT_EQ(cfg.quarantine_after, 2u);
  EXPECT_EQ(cfg.quarantine_ms, 5000u);
  EXPECT_EQ(cfg.max_nodes, 10u);
  EXPECT_EQ(cfg.hello_rate, 7u);
  for (const char* bad :
       {"max_node_slots: 0\n", "max_nodes: 0\n", "max_nodes: 5000\n", "quarantine_ms: 600001\n",
        "quarantine_after: 0\n", "hello_burst_per_peer: 0\n"}) {
    broker_config c;
    auto r = broker_config_load(testing::write_temp_file("b7.yaml", bad), c);
    ASSERT_FALSE(r) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    EXPECT_NE(r.message().find(key), std::string::npos) << r.message();
    EXPECT_EQ(c.max_nodes, broker_config{}.max_nodes) << "a bad file changes nothing";
  }
}

TEST(BrokerConfig, ReadsTheLimits) {
  broker_config cfg;
  ASSERT_TRUE(broker_config_load(
      testing::write_temp_file(
          "b6.yaml",
          "max_peer_outbox_bytes: 16777216\npeer_stall_ms: 500\nmax_outbox_bytes: "
          "33554432\nmax_client_queued_jobs: 3\nmax_client_queued_bytes: 1000\n"
          "max_queue_bytes: 5000000000\n"),
      cfg));
  EXPECT_EQ(cfg.max_peer_outbox_bytes, 16777216u);
  EXPECT_EQ(cfg.peer_stall_ms, 500u);
  EXPECT_EQ(cfg.max_outbox_bytes, 33554432u);
  EXPECT_EQ(cfg.max_client_queued_jobs, 3u);
  EXPECT_EQ(cfg.max_client_queued_bytes, 1000u);
  EXPECT_EQ(cfg.max_queue_bytes, 5000000000u);
  // An outbox must hold one largest message, and all outboxes one peer's.
  auto r =
      broker_config_load(testing::write_temp_file("b7.yaml", "max_peer_outbox_bytes: 1000\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("max_peer_outbox_bytes must be at least"), std::string::npos);
  r = broker_config_load(testing::write_temp_file("b8.yaml",
                                                  "max_outbox_bytes: 8388608\n"
                                                  "max_peer_outbox_bytes: 16777216\n"),
                         cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("max_outbox_bytes must be at least"), std::string::npos);
}

TEST(BrokerConfig, ReadsValuesAndKeepsTheRest) {
  broker_config cfg;
  ASSERT_TRUE(broker_config_load(
      testing::write_temp_file("b1.yaml", "heartbeat_ms: 250\nmax_attempts: 5\n"), cfg));
  EXPECT_EQ(cfg.heartbeat_ms, 250u);
  EXPECT_EQ(cfg.max_attempts, 5u);
  EXPECT_EQ(cfg.liveness, 3u);
}

TEST(BrokerConfig, BadFilesNameTheProblem) {
  broker_config cfg;
  auto r = broker_config_load(testing::write_temp_file("b2.yaml", "heartbeat: 5\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("unknown setting 'heartbeat'"), std::string::npos) << r.message();
  r = broker_config_load(testing::write_temp_file("b3.yaml", "liveness: many\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("'liveness' has the wrong type"), std::string::npos) << r.message();
  r = broker_config_load(testing::write_temp_file("b4.yaml", "heartbeat_ms: 1\n"), cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("heartbeat_ms must be"), std::string::npos) << r.message();
  r = broker_config_load(testing::write_temp_file("b5.yaml", "[unclosed\n"), cfg);
  ASSERT_FALSE(r);
  r = broker_config_load("/nonexistent/broker.yaml", cfg);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("/nonexistent/broker.yaml"), std::string::npos);
}

}  // namespace
}  // namespace hearth::broker
