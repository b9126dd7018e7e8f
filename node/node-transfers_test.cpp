// The node's side of transfers (PROTOCOL.md 16) against a FAKE broker: a real node_daemon (null
// engine, a store in a temporary folder, its transfer socket on loopback) copies a model from a
// holder (a real transfer server in this process) when the broker sends model_fetch, reports
// transfer_status, advertises the model, serves it to another node under a transfer_allow
// ticket, and removes it on model_evict.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "node/fake-broker.h"
#include "node/node.h"
#include "node/transfer-fetch.h"
#include "node/transfer-server.h"
#include "store/model-store.h"
#include "tests/testdata.h"

namespace hearth::node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_fakes::fake_broker;

// A TCP port nothing listens on now (the kernel's pick, released again).
uint32_t free_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

const wire::model_info* model_named(const std::vector<wire::model_info>& ms,
                                    const std::string& name) {
  auto it = std::find_if(ms.begin(), ms.end(), [&](const auto& m) { return m.name == name; });
  return it == ms.end() ? nullptr : &*it;
}

class node_transfers_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string stories = hearth::testing::testdata_path("models/stories260K.gguf");
    ASSERT_FALSE(stories.empty()) << "stories260K test data missing";
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
    // The holder: a store with the model's blob and a transfer server over it.
    holder_store_ = std::make_unique<store::model_store>(dir_ / "holder");
    digest_ = store::sha256_file(stories);
    size_ = fs::file_size(stories);
    holder_store_->import_file(stories, digest_);
    holder_ =
        std::make_unique<transfer_server>(transfer_server_options{"tcp://127.0.0.1:*", {}},
                                          [this](std::string_view d) -> std::optional<fs::path> {
                                            if (!holder_store_->has_blob(d)) return std::nullopt;
                                            return holder_store_->blob_path(d);
                                          });

    node_config cfg;
    cfg.broker = broker_.endpoint();
    cfg.models_dir = (dir_ / "models").string();
    cfg.name = "target";
    cfg.engine = "null";
    cfg.store = (dir_ / "store").string();
    cfg.transfer_bind = "127.0.0.1";
    cfg.transfer_port = free_port();
    node_ = std::make_unique<node_daemon>(cfg);
    thread_ = std::thread([this] { node_->run(stop_); });
    auto hello = broker_.wait_for<wire::node_hello>();
    ASSERT_TRUE(hello);
    EXPECT_EQ(hello->transfer_port, cfg.transfer_port);
    EXPECT_EQ(hello->transfer_key, "");
    EXPECT_GT(hello->store_capacity, 0u);
    node_endpoint_ = "tcp://127.0.0.1:" + std::to_string(cfg.transfer_port);
    broker_.welcome();
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    node_.reset();
    holder_.reset();
    fs::remove_all(dir_);
  }

  wire::model_fetch copy(uint64_t transfer_id) const {
    wire::model_fetch m;
    m.transfer_id = transfer_id;
    m.name = "stories-copy";
    m.source = "peer:holder";
    m.files = {{"stories-copy.gguf", digest_, size_}};
    m.peers = {{"holder", "tcp://127.0.0.1:" + std::to_string(holder_->port()), ""}};
    m.origin = "hf:karpathy/tinyllamas@abc/stories260K.gguf";
    return m;
  }

  std::optional<wire::transfer_status> final_status(uint64_t transfer_id) {
    return broker_.wait_for<wire::transfer_status>([&](const wire::transfer_status& s) {
      return s.transfer_id == transfer_id && s.state != "running";
    });
  }

  fs::path dir_ = fs::temp_directory_path() / ("hearth_node_transfers_" + std::to_string(getpid()));
  std::unique_ptr<store::model_store> holder_store_;
  std::unique_ptr<transfer_server> holder_;
  std::string digest_;
  uint64_t size_ = 0;
  std::string node_endpoint_;
  fake_broker broker_;
  std::unique_ptr<node_daemon> node_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(node_transfers_test, copies_advertises_serves_and_evicts_a_model) {
  holder_->allow({5, "target", "", {digest_}, 60000});
  broker_.send(copy(5));
  auto running = broker_.wait_for<wire::transfer_status>(
      [](const wire::transfer_status& s) { return s.transfer_id == 5; });
  ASSERT_TRUE(running);
  EXPECT_EQ(running->state, "running");
  EXPECT_EQ(running->bytes_total, size_);
  auto done = final_status(5);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, "done") << done->error;
  EXPECT_EQ(done->digest, digest_);
  EXPECT_EQ(done->bytes_done, size_);
  EXPECT_EQ(done->bytes_from_peers, size_);
  EXPECT_EQ(done->from, "peer:holder");
  // Advertised at once, with its digest and where it came from.
  auto status = broker_.wait_for<wire::node_status>(
      [](const wire::node_status& s) { return model_named(s.models, "stories-copy"); });
  ASSERT_TRUE(status) << "the copied model was not advertised";
  const auto* m = model_named(status->models, "stories-copy");
  EXPECT_EQ(m->digest, digest_);
  EXPECT_EQ(m->source, "hf:karpathy/tinyllamas@abc/stories260K.gguf");

  // Another node copies it from this one, with the ticket the broker gives this node.
  broker_.send(wire::transfer_allow{6, "third", "", {digest_}, 60000});
  store::model_store third(dir_ / "third");
  auto fetch = copy(6);
  fetch.peers = {{"target", node_endpoint_, ""}};
  result<store::manifest> copied = error{"not tried"};
  for (int i = 0; i < 50 && !copied; ++i) {  // the ticket reaches the node through its loop
    copied = fetch_model(third, fetch, {}, {}, nullptr);
    if (!copied) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(copied) << copied.message();
  EXPECT_EQ(copied->digest, digest_);

  broker_.send(wire::model_evict{"stories-copy"});
  auto after = broker_.wait_for<wire::node_status>(
      [](const wire::node_status& s) { return !model_named(s.models, "stories-copy"); });
  ASSERT_TRUE(after) << "the evicted model is still advertised";
  EXPECT_FALSE(store::model_store(dir_ / "store").find("stories-copy"));
}

TEST_F(node_transfers_test, a_copy_the_holder_refuses_fails) {
  broker_.send(copy(7));  // no ticket at the holder
  auto done = final_status(7);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, "failed");
  EXPECT_NE(done->error.find("no ticket for transfer 7"), std::string::npos) << done->error;
}

}  // namespace
}  // namespace hearth::node
