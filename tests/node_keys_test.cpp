// hearth-node's side of CURVE against a stand-in broker (tests/curve-server.h), without the real
// broker: the keys from flags and from the YAML file reach the handshake; a refused key is logged
// once and retried with backoff until the broker allows it, then the node just registers; a
// broker refusing the node's name ends it with exit code 1 and the broker's message on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <zmq_addon.hpp>

#include "schema/codec.h"
#include "tests/cluster.h"
#include "tests/curve-server.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;

// Receives at the stand-in until a node_hello arrives; returns its routing id.
std::optional<std::string> await_hello(zmq::socket_t& router, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (!testing::poll_in(router, 50ms)) continue;
    std::vector<zmq::message_t> parts;
    if (!zmq::recv_multipart(router, std::back_inserter(parts)) || parts.size() != 4) continue;
    if (uint8_t(parts[2].to_string()[0]) == uint8_t(wire::command::node_hello)) {
      return parts[0].to_string();
    }
  }
  return std::nullopt;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class node_keys : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(net::curve_cert_save(*net::curve_cert_generate("broker"), dir_.path(), "broker"));
    ASSERT_TRUE(net::curve_cert_save(*net::curve_cert_generate("node-a"), dir_.path(), "node-a"));
    std::filesystem::create_directories(dir_.file("models"));
    server_ = std::make_unique<testing::curve_server>(
        ctx_, *net::curve_cert_load(dir_.file("broker.key")));
  }
  testing::process start_node(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {HEARTH_NODE_BIN, "--broker", server_->endpoint,   "--name",
                                     "node-a",        "--models", dir_.file("models"), "--engine",
                                     "null"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::spawn(argv, dir_.file("node.log"));
  }
  testing::temp_dir dir_;
  zmq::context_t ctx_{1};
  testing::zap_handler zap_{ctx_, 400};
  std::unique_ptr<testing::curve_server> server_;
};

TEST_F(node_keys, a_refused_key_is_logged_once_and_works_once_allowed) {
  auto node =
      start_node({"--broker-key", dir_.file("broker.pub"), "--key", dir_.file("node-a.key")});
  ASSERT_TRUE(testing::wait_until([&] { return zap_.requests() >= 3; }, 20s)) << node.log();
  EXPECT_FALSE(await_hello(server_->sock, 10ms));
  const std::string refused = "refused this node's key " + dir_.file("node-a.key");
  EXPECT_EQ(count(node.log(), refused), 1u) << node.log();
  EXPECT_TRUE(node.running());
  zap_.set_status(200);  // the admin adds the key
  EXPECT_TRUE(await_hello(server_->sock, 20s)) << node.log();
  EXPECT_EQ(count(node.log(), refused), 1u) << node.log();
}

TEST_F(node_keys, the_yaml_keys_are_relative_to_its_folder) {
  zap_.set_status(200);
  std::filesystem::create_directories(dir_.file("conf"));
  std::ofstream(dir_.file("conf/node.yaml")) << "broker_key: ../broker.pub\nkey: ../node-a.key\n";
  auto node = start_node({"--config", dir_.file("conf/node.yaml")});
  EXPECT_TRUE(await_hello(server_->sock, 20s)) << node.log();
}

TEST_F(node_keys, bad_keys_stop_the_node_before_it_connects) {
  auto only_one = start_node({"--broker-key", dir_.file("broker.pub")});
  EXPECT_EQ(only_one.wait(), 2);
  EXPECT_NE(only_one.log().find("hearth-node: error: broker_key is set but not key"),
            std::string::npos)
      << only_one.log();
  auto public_as_own =
      start_node({"--broker-key", dir_.file("broker.pub"), "--key", dir_.file("node-a.pub")});
  EXPECT_EQ(public_as_own.wait(), 1);
  EXPECT_NE(public_as_own.log().find("node-a.pub: a public certificate"), std::string::npos)
      << public_as_own.log();
}

TEST_F(node_keys, a_name_taken_refusal_ends_the_node_with_the_brokers_message) {
  zap_.set_status(200);
  auto node =
      start_node({"--broker-key", dir_.file("broker.pub"), "--key", dir_.file("node-a.key")});
  auto id = await_hello(server_->sock, 20s);
  ASSERT_TRUE(id) << node.log();
  wire::error_reply e;
  e.code = wire::error_code::name_taken;
  e.message = "the name node-a is in use by another node key; choose --name";
  const std::string body = wire::encode(e);
  const char code = char(uint8_t(wire::command::error));
  std::vector<zmq::const_buffer> msg = {zmq::buffer(*id), zmq::buffer(wire::signature),
                                        zmq::buffer(&code, 1), zmq::buffer(body)};
  zmq::send_multipart(server_->sock, msg);
  EXPECT_EQ(node.wait(10s), 1) << node.log();
  EXPECT_NE(node.log().find("hearth-node: error: " + e.message + "\n"), std::string::npos)
      << node.log();
}

}  // namespace
}  // namespace hearth
