// The broker's side of models flowing through the homelab (issue 54; schema/PROTOCOL.md section
// 16): pulls and copies routed to the right nodes, tickets for the holders, admin keys only,
// transfer_status bookkeeping, a failed copy tried once more from the holders online then, a
// holder or target going offline mid-transfer, evictions. A real broker process with auth; the
// nodes are fake (tests/fake-node.h): raw sockets that say what the test wants and show what the
// broker sent them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/fake-node.h"

namespace hearth {
namespace {

using namespace std::chrono_literals;
using testing::fake_node;
using testing::test_client;

const std::string digest_m = "sha256:" + std::string(64, 'a');
constexpr uint64_t size_m = 5000;

wire::model_info holder_model() {
  wire::model_info m;
  m.name = "m";
  m.architecture = "llama";
  m.size_bytes = size_m;
  m.digest = digest_m;
  m.files = {{"m.gguf", digest_m, size_m}};
  m.source = "hf:owner/repo@0123/m.gguf";
  return m;
}

class model_flow_test : public testing::stories_cluster_test {
 protected:
  void SetUp() override {
    // Fake nodes heartbeat only while they wait for a message: a node is dead after 10 s here.
    c_.broker_settings({{"liveness", "50"}});
    broker_ = c_.start_broker();
    admin_ = c_.client("admin");
  }

  // A fake node's hello: `models`, a transfer socket on `port` (0: none), `capacity` bytes of
  // store.
  std::unique_ptr<fake_node> node(const std::string& name, std::vector<wire::model_info> models,
                                  uint32_t port, uint64_t capacity) {
    auto n = std::make_unique<fake_node>(c_, name);
    wire::node_hello h = testing::plain_hello(name, std::move(models));
    h.transfer_port = port;
    h.transfer_key = "key-of-" + name;
    h.store_capacity = capacity;
    n->send(h);
    EXPECT_TRUE(n->welcomed()) << name;
    return n;
  }

  std::vector<wire::transfer_info> transfers() {
    auto r = admin_->request<wire::models_reply>(wire::list_models{});
    return r ? r->transfers : std::vector<wire::transfer_info>{};
  }
  std::optional<wire::transfer_info> transfer(uint64_t id) {
    for (const auto& t : transfers()) {
      if (t.transfer_id == id) return t;
    }
    return std::nullopt;
  }
  std::optional<wire::transfer_info> transfer_in_state(uint64_t id, const std::string& state) {
    std::optional<wire::transfer_info> t;
    testing::wait_until([&] { return (t = transfer(id)) && t->state == state; });
    return t;
  }
  std::string public_key(const std::string& node) {
    return c_.client_keys("node", node).own.public_key;
  }

  testing::process broker_;
  std::unique_ptr<test_client> admin_;
};

TEST_F(model_flow_test, OnlyAdminKeysMoveModels) {
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto client = c_.client("client");
  std::string error;
  EXPECT_FALSE(
      client->request<wire::transfers_started>(wire::place_model{0, "m", "n2", false}, &error));
  EXPECT_NE(error.find("unauthorized"), std::string::npos) << error;
  EXPECT_NE(error.find("admin key"), std::string::npos) << error;
  EXPECT_FALSE(client->request<wire::ok>(wire::evict_model{0, "m", "n1"}, &error));
  EXPECT_NE(error.find("unauthorized"), std::string::npos) << error;
  EXPECT_FALSE(client->request<wire::transfers_started>(
      wire::pull_model{0, "hf:owner/repo", "", "", "n1", false}, &error));
  EXPECT_NE(error.find("unauthorized"), std::string::npos) << error;
  // Nothing reached the node; an admin's evict does.
  EXPECT_TRUE(admin_->request<wire::ok>(wire::evict_model{0, "m", "n1"}, &error)) << error;
  auto evict = n1->next<wire::model_evict>(5s);
  ASSERT_TRUE(evict);
  EXPECT_EQ(evict->name, "m");
  EXPECT_FALSE(admin_->request<wire::ok>(wire::evict_model{0, "other", "n1"}, &error));
  EXPECT_NE(error.find("not_found"), std::string::npos) << error;
}

TEST_F(model_flow_test, PullGoesToTheNodeAndItsReportsAreRecorded) {
  auto n1 = node("n1", {}, 7001, uint64_t(1) << 30);
  auto bare = node("bare", {}, 0, 0);  // keeps no store
  std::string error;
  EXPECT_FALSE(admin_->request<wire::transfers_started>(
      wire::pull_model{0, "hf:owner/repo:Q4_K_M", "", "", "bare", false}, &error));
  EXPECT_NE(error.find("invalid_params"), std::string::npos) << error;
  EXPECT_FALSE(admin_->request<wire::transfers_started>(
      wire::pull_model{0, "hf:owner/repo:Q4_K_M", "", "", "nobody", false}, &error));
  EXPECT_NE(error.find("not_found"), std::string::npos) << error;
  EXPECT_FALSE(admin_->request<wire::transfers_started>(
      wire::pull_model{0, "https://example.com/m.gguf", "", "", "n1", false}, &error));
  EXPECT_NE(error.find("sha256"), std::string::npos) << error;

  auto started = admin_->request<wire::transfers_started>(
      wire::pull_model{0, "hf:owner/repo:Q4_K_M", "", "", "", true}, &error);
  ASSERT_TRUE(started) << error;
  ASSERT_EQ(started->transfers.size(), 1u);  // --all: only the node with a store
  const auto t = started->transfers[0];
  EXPECT_EQ(t.node, "n1");
  EXPECT_EQ(t.state, "starting");
  auto fetch = n1->next<wire::model_fetch>(5s);
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->transfer_id, t.transfer_id);
  EXPECT_EQ(fetch->source, "hf:owner/repo:Q4_K_M");
  EXPECT_TRUE(fetch->peers.empty());

  // The same pull again while it runs is the same transfer.
  auto again = admin_->request<wire::transfers_started>(
      wire::pull_model{0, "hf:owner/repo:Q4_K_M", "", "", "n1", false}, &error);
  ASSERT_TRUE(again) << error;
  ASSERT_EQ(again->transfers.size(), 1u);
  EXPECT_EQ(again->transfers[0].transfer_id, t.transfer_id);

  n1->send(wire::transfer_status{t.transfer_id, "running", 1000, 4000, 0, "internet", "", ""});
  auto running = transfer_in_state(t.transfer_id, "running");
  ASSERT_TRUE(running);
  EXPECT_EQ(running->bytes_done, 1000u);
  EXPECT_EQ(running->bytes_total, 4000u);
  n1->send(wire::transfer_status{t.transfer_id, "done", 4000, 4000, 0, "internet", digest_m, ""});
  auto done = transfer_in_state(t.transfer_id, "done");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->bytes_done, 4000u);

  // The bytes count as pulled from the internet.
  auto metrics = admin_->request<wire::metrics_reply>(wire::get_metrics{});
  ASSERT_TRUE(metrics);
  double internet = -1;
  for (const auto& f : metrics->families) {
    if (f.name != "hearth_model_transfer_bytes_total") continue;
    for (const auto& s : f.samples) {
      if (s.labels == std::vector<std::string>{"internet"}) internet = s.value;
    }
  }
  EXPECT_EQ(internet, 4000);
}

TEST_F(model_flow_test, PlaceTicketsTheHoldersAndSendsTheTargetThePeers) {
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto n2 = node("n2", {}, 7002, uint64_t(1) << 30);
  auto small = node("small", {}, 7003, 100);  // its store cannot hold 5000 bytes

  auto models = admin_->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(models);
  ASSERT_EQ(models->models.size(), 1u);
  EXPECT_EQ(models->models[0].digest, digest_m);
  EXPECT_EQ(models->models[0].holders, std::vector<std::string>{"n1"});

  std::string error;
  EXPECT_FALSE(
      admin_->request<wire::transfers_started>(wire::place_model{0, "m", "small", false}, &error));
  EXPECT_NE(error.find("store can take 100"), std::string::npos) << error;
  EXPECT_FALSE(
      admin_->request<wire::transfers_started>(wire::place_model{0, "nope", "n2", false}, &error));
  EXPECT_NE(error.find("not_found"), std::string::npos) << error;
  auto none = admin_->request<wire::transfers_started>(wire::place_model{0, "m", "n1", false});
  ASSERT_TRUE(none);  // it holds it already
  EXPECT_TRUE(none->transfers.empty());

  // --all: every node that lacks it and can hold it.
  auto started = admin_->request<wire::transfers_started>(wire::place_model{0, "m", "", true});
  ASSERT_TRUE(started);
  ASSERT_EQ(started->transfers.size(), 1u);
  const auto t = started->transfers[0];
  EXPECT_EQ(t.node, "n2");
  EXPECT_EQ(t.source, "peer:n1");
  EXPECT_EQ(t.bytes_total, size_m);

  auto ticket = n1->next<wire::transfer_allow>(5s);
  ASSERT_TRUE(ticket);
  EXPECT_EQ(ticket->transfer_id, t.transfer_id);
  EXPECT_EQ(ticket->node, "n2");
  EXPECT_EQ(ticket->public_key, public_key("n2"));  // the key the broker knows n2 by
  EXPECT_EQ(ticket->digests, std::vector<std::string>{digest_m});
  auto fetch = n2->next<wire::model_fetch>(5s);
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->transfer_id, t.transfer_id);
  EXPECT_EQ(fetch->name, "m");
  EXPECT_EQ(fetch->origin, "hf:owner/repo@0123/m.gguf");
  ASSERT_EQ(fetch->files.size(), 1u);
  EXPECT_EQ(fetch->files[0].digest, digest_m);
  ASSERT_EQ(fetch->peers.size(), 1u);
  EXPECT_EQ(fetch->peers[0].node, "n1");
  EXPECT_EQ(fetch->peers[0].endpoint, "tcp://127.0.0.1:7001");
  EXPECT_EQ(fetch->peers[0].public_key, "key-of-n1");

  // Only the target reports on it: n1's word about n2's transfer is dropped.
  n1->send(wire::transfer_status{t.transfer_id, "done", size_m, size_m, size_m, "", digest_m, ""});
  n2->send(wire::transfer_status{t.transfer_id, "running", 10, size_m, 10, "peer:n1", "", ""});
  auto running = transfer_in_state(t.transfer_id, "running");
  ASSERT_TRUE(running);
  EXPECT_EQ(running->bytes_done, 10u);
}

TEST_F(model_flow_test, AFailedCopyIsTriedOnceMoreFromTheHoldersOnlineThen) {
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto n3 = node("n3", {holder_model()}, 7003, uint64_t(1) << 30);
  auto n2 = node("n2", {}, 7002, uint64_t(1) << 30);
  auto started = admin_->request<wire::transfers_started>(wire::place_model{0, "m", "n2", false});
  ASSERT_TRUE(started);
  ASSERT_EQ(started->transfers.size(), 1u);
  const uint64_t id = started->transfers[0].transfer_id;
  auto fetch = n2->next<wire::model_fetch>(5s);
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->peers.size(), 2u);
  EXPECT_TRUE(n1->next<wire::transfer_allow>(5s));
  EXPECT_TRUE(n3->next<wire::transfer_allow>(5s));

  // A holder goes away mid-copy; the copy fails on the target; the broker sends it again with
  // the holder that is left. The bye and n2's reports come on different sockets: the broker has
  // taken the bye before n2 reports (else the retry may still offer n1).
  n1->send(wire::node_bye{});
  ASSERT_TRUE(testing::wait_until([&] {
    auto r = admin_->request<wire::nodes_reply>(wire::list_nodes{});
    return r && std::ranges::none_of(r->nodes, [](const wire::node_summary& n) {
             return n.name == "n1" && n.online;
           });
  }));
  n2->send(wire::transfer_status{id, "running", 100, size_m, 100, "peer:n1", "", ""});
  ASSERT_TRUE(transfer_in_state(id, "running"));
  n2->send(wire::transfer_status{id, "failed", 100, size_m, 100, "", "", "peer n1 went away"});
  auto retry = n2->next<wire::model_fetch>(5s);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->transfer_id, id);
  ASSERT_EQ(retry->peers.size(), 1u);
  EXPECT_EQ(retry->peers[0].node, "n3");
  EXPECT_TRUE(n3->next<wire::transfer_allow>(5s));

  // Once only: the second failure is final, with the node's reason.
  n2->send(wire::transfer_status{id, "failed", 100, size_m, 100, "", "", "digest mismatch"});
  auto failed = transfer_in_state(id, "failed");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->error, "digest mismatch");
}

TEST_F(model_flow_test, ATargetGoingOfflineFailsItsTransfer) {
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto n2 = node("n2", {}, 7002, uint64_t(1) << 30);
  auto started = admin_->request<wire::transfers_started>(wire::place_model{0, "m", "n2", false});
  ASSERT_TRUE(started);
  ASSERT_EQ(started->transfers.size(), 1u);
  const uint64_t id = started->transfers[0].transfer_id;
  ASSERT_TRUE(n2->next<wire::model_fetch>(5s));
  n2->send(wire::node_bye{});
  auto failed = transfer_in_state(id, "failed");
  ASSERT_TRUE(failed);
  EXPECT_NE(failed->error.find("went offline"), std::string::npos) << failed->error;
  // Nothing is placed on an offline node.
  std::string error;
  EXPECT_FALSE(
      admin_->request<wire::transfers_started>(wire::place_model{0, "m", "n2", false}, &error));
  EXPECT_NE(error.find("not online"), std::string::npos) << error;
}

// auto_place: a job whose model no online node can run now (its only holder is quarantined) waits
// while the broker copies the model onto the node with a store and the most free memory, and the
// job's history says so.
TEST_F(model_flow_test, AutoPlaceCopiesTheModelAJobWaitsFor) {
  broker_ = testing::process();
  c_.broker_settings({{"liveness", "50"}, {"auto_place", "true"}, {"quarantine_after", "1"}});
  broker_ = c_.start_broker();
  admin_ = c_.client("admin");
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto n2 = node("n2", {}, 7002, uint64_t(1) << 30);
  n1->send(wire::node_pull{1});
  auto acc = admin_->request<wire::accepted>(testing::greedy_job("m", "hi", 4));
  ASSERT_TRUE(acc);
  auto assign = n1->next<wire::job_assign>(5s);
  ASSERT_TRUE(assign);
  // n1 fails it by its own fault: quarantined, the job queued again with no node to run it.
  wire::job_final f;
  f.job_id = assign->job_id;
  f.attempt = assign->attempt;
  f.state = wire::job_state::failed;
  f.error = "the GPU fell off the bus";
  n1->send(f);
  auto fetch = n2->next<wire::model_fetch>(10s);
  ASSERT_TRUE(fetch);
  EXPECT_EQ(fetch->name, "m");
  ASSERT_EQ(fetch->peers.size(), 1u);
  EXPECT_EQ(fetch->peers[0].node, "n1");
  EXPECT_TRUE(n1->next<wire::transfer_allow>(5s));
  bool noted = false;
  testing::wait_until([&] {
    auto d = admin_->request<wire::job_reply>(wire::get_job{0, acc->job_id});
    for (const auto& e : d ? d->job.events : std::vector<wire::job_event>{}) {
      noted = noted || (e.event == "waiting" && e.detail == "waiting for placement of m on n2");
    }
    return noted;
  });
  EXPECT_TRUE(noted);
}

// `hearth models` shows digests, holders and transfers; `hearth models place|evict` need an
// admin key.
TEST_F(model_flow_test, TheCliPlacesEvictsAndShowsTransfers) {
  auto n1 = node("n1", {holder_model()}, 7001, uint64_t(1) << 30);
  auto n2 = node("n2", {}, 7002, uint64_t(1) << 30);
  auto hearth = [&](const std::string& args, const std::string& role) {
    std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c_.endpoint();
    for (const auto& a : c_.key_args(role, "default")) cmd += " " + a;
    std::string out;
    if (FILE* p = popen((cmd + " 2>&1").c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
      pclose(p);
    }
    return out;
  };
  std::string out = hearth("models place m --to n2 --no-wait", "client");
  EXPECT_NE(out.find("admin key"), std::string::npos) << out;
  EXPECT_TRUE(transfers().empty());
  out = hearth("models place m --to n2 --no-wait", "admin");
  EXPECT_NE(out.find("m -> n2 from peer:n1: starting"), std::string::npos) << out;
  ASSERT_TRUE(n2->next<wire::model_fetch>(5s));
  out = hearth("models", "client");
  EXPECT_NE(out.find(digest_m.substr(0, 19)), std::string::npos) << out;
  EXPECT_NE(out.find("transfers:"), std::string::npos) << out;
  out = hearth("models evict m --from n1", "admin");
  EXPECT_NE(out.find("evicted m from n1"), std::string::npos) << out;
  EXPECT_TRUE(n1->next<wire::model_evict>(5s));
}

}  // namespace
}  // namespace hearth
