// Issue 52: a model file truncated under a real hearth-node that serves it (its CPU weights are
// memory-mapped, and a read past a truncated file's end raises SIGBUS: the node died with exit
// code 135 and nothing logged). Now the node stays up and says in its log which file changed, the
// jobs using the file are handed back to the broker (which runs them again once the file is good,
// without holding it against the node), and a good copy written over it (`cp` keeps the inode) is
// served again after the rescan.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `cp src dst`: the same inode rewritten when dst exists (the test data is read-only).
void copy_model(const std::string& src, const std::string& dst) {
  if (fs::exists(dst)) fs::permissions(dst, fs::perms::owner_write, fs::perm_options::add);
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
  fs::permissions(dst, fs::perms::owner_write, fs::perm_options::add);
}

TEST(model_file_change, a_node_outlives_its_model_file_truncated_and_serves_the_new_copy) {
  // F32: every product reads its weights from the mapping (no packed copy).
  const std::string src = testing::testdata_path("models/synthetic/synthetic-llama-a.f32.gguf");
  ASSERT_FALSE(src.empty()) << "synthetic-llama-a test data missing";
  testing::cluster c;
  auto broker = c.start_broker();
  const std::string models = c.dir().file("models");
  fs::create_directories(models);
  const std::string file = models + "/model.gguf";
  copy_model(src, file);
  auto node = c.start_node("cpu", models, "cpu", 1, {"--models-rescan-ms", "500"});
  auto client = c.client();
  ASSERT_TRUE(testing::nodes_online(*client, 1)) << broker.log() << node.log();
  auto logs = [&] { return testing::logs_of({{"broker", &broker}, {"node", &node}}); };

  auto first = client->request<wire::accepted>(testing::greedy_job("model", "hi", 4));
  ASSERT_TRUE(first);
  auto d = client->wait_final(first->job_id);
  ASSERT_TRUE(d) << logs();
  ASSERT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error << logs();

  // A long job (1,500 greedy tokens, about half a second), truncated under it once its first
  // tokens came; then one more job on the truncated file, in case the first ended before.
  auto s = testing::greedy_job("model", "hi", 1500);
  s.watch = true;
  auto long_job = client->request<wire::accepted>(s);
  ASSERT_TRUE(long_job);
  while (auto e = client->next_event(10s)) {
    if (e->cmd == wire::command::job_tokens || e->cmd == wire::command::job_done) break;
  }
  fs::resize_file(file, 4096);
  auto after = client->request<wire::accepted>(testing::greedy_job("model", "hi", 4));
  ASSERT_TRUE(after);
  EXPECT_TRUE(testing::wait_until(
      [&] { return node.log().find("changed on disk") != std::string::npos; }, 30s))
      << logs();
  EXPECT_TRUE(node.running()) << "the node died: " << logs();

  // The good file again: served after the rescan, and the waiting jobs end.
  copy_model(src, file);
  auto again = client->request<wire::accepted>(testing::greedy_job("model", "hi", 4));
  ASSERT_TRUE(again);
  d = client->wait_final(again->job_id, 60s);
  ASSERT_TRUE(d) << logs();
  EXPECT_EQ(d->summary.state, wire::job_state::completed) << d->summary.error << logs();
  // The attempts the change cut short were handed back (stop_reason model_changed), not failed
  // as the node's fault: they run again on the good copy, and the node is not quarantined (3
  // failed attempts within a minute would quarantine the only node of the model). A job that
  // reached the node after the truncation but before the rescan may fail to load the truncated
  // file: that is a node's fault like any load failure (item 7), so it is not asserted on.
  size_t handed_back = 0;
  for (uint64_t id : {long_job->job_id, after->job_id}) {
    auto f = client->wait_final(id, 60s);
    ASSERT_TRUE(f) << "job " << id << " did not end: " << logs();
    EXPECT_EQ(f->summary.state, wire::job_state::completed) << f->summary.error << logs();
    for (const auto& e : f->events) {
      if (e.detail.find("changed on disk") == std::string::npos) continue;
      EXPECT_NE(e.detail.find("handed it back"), std::string::npos) << e.event << ": " << e.detail;
      ++handed_back;
    }
  }
  EXPECT_GE(handed_back, 1u) << "no attempt was cut short by the change: " << logs();
  auto nodes = client->request<wire::nodes_reply>(wire::list_nodes{});
  ASSERT_TRUE(nodes && nodes->nodes.size() == 1) << logs();
  EXPECT_EQ(nodes->nodes[0].quarantined_until_ms, 0) << logs();
  EXPECT_TRUE(node.running()) << logs();
  EXPECT_EQ(node.log().find("Bus error"), std::string::npos) << logs();
}

}  // namespace
}  // namespace hearth
