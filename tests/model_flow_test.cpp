// Issue 54's "done means", end to end with real processes: a broker and two nodes (with keys, as a
// homelab runs), the FAKE model source (tests/fake-model-source.py: the only fake, standing in for
// the Hugging Face Hub). `HF_ENDPOINT=<fake> hearth pull hf:OWNER/REPO:Q4_K_M --to n1` makes the
// model serve on n1; with the source stopped, `hearth models place NAME --to n2` copies it from
// n1 over the nodes' transfer sockets and n2 serves it with the same digest; n1 killed, a job
// for the model runs on n2.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "tests/cluster-fixture.h"
#include "tests/cluster.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::process;

const std::string k_model = "tiny-Q4_K_M";

class model_flow_e2e : public testing::stories_cluster_test {
 protected:
  // `hearth ARGS` with the admin key: its exit code, and what it printed.
  int hearth(const std::string& args, std::string& out) {
    std::string cmd = std::string(HEARTH_BIN) + " " + args + " --broker " + c_.endpoint();
    for (const auto& a : c_.key_args("admin", "default")) cmd += " " + a;
    out.clear();
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // A node with an empty models folder, its own store and transfer port.
  process node(const std::string& name) {
    const std::string config = c_.dir().file(name + ".yaml");
    std::ofstream(config) << "transfer_port: " << testing::free_port() << "\n";
    const std::string models_dir = c_.dir().file("models-" + name);
    fs::create_directories(models_dir);
    return c_.start_node(name, models_dir, "cpu", 1, {"--config", config});
  }
  // The model as `name` advertises it, once it does.
  std::optional<wire::model_info> served_by(const std::string& name) {
    std::optional<wire::model_info> found;
    testing::wait_until(
        [&] {
          auto r = client_->request<wire::nodes_reply>(wire::list_nodes{});
          if (!r) return false;
          for (const auto& n : r->nodes) {
            if (n.name != name || !n.online) continue;
            for (const auto& m : n.models) {
              if (m.name == k_model && !m.digest.empty()) found = m;
            }
          }
          return found.has_value();
        },
        30s);
    return found;
  }

  std::unique_ptr<testing::test_client> client_;
};

TEST_F(model_flow_e2e, PullOnceThenCopyOverTheLanThenServeWithoutTheFirstNode) {
  // The fake Hub: one repository with the model as a Q4_K_M file.
  const fs::path root = c_.dir().file("hub");
  fs::create_directories(root / "hf/org/tiny-GGUF/main");
  fs::copy_file(testing::testdata_path("models/stories260K.gguf"),
                root / "hf/org/tiny-GGUF/main/tiny-Q4_K_M.gguf");
  const std::string port_file = c_.dir().file("hub-port");
  process hub = testing::spawn(
      {"/usr/bin/python3", std::string(HEARTH_SOURCE_DIR) + "/tests/fake-model-source.py", "--root",
       root.string(), "--port-file", port_file},
      c_.dir().file("hub.log"));
  ASSERT_TRUE(testing::wait_until([&] {
    return fs::exists(port_file) && fs::file_size(port_file);
  })) << hub.log();
  int port = 0;
  std::ifstream(port_file) >> port;
  // The node pulls, so the node's environment names the Hub (as huggingface_hub reads it).
  ::setenv("HF_ENDPOINT", ("http://localhost:" + std::to_string(port)).c_str(), 1);

  process broker = c_.start_broker();
  process n1 = node("n1");
  process n2 = node("n2");
  client_ = c_.client("client");
  auto logs = [&] {
    return testing::logs_of({{"broker", &broker}, {"n1", &n1}, {"n2", &n2}, {"hub", &hub}});
  };

  std::string out;
  ASSERT_TRUE(testing::wait_until([&] {
    auto r = client_->request<wire::nodes_reply>(wire::list_nodes{});
    return r && r->nodes.size() == 2 && r->nodes[0].online && r->nodes[1].online;
  })) << logs();
  ASSERT_EQ(hearth("pull hf:org/tiny-GGUF:Q4_K_M --to n1", out), 0) << out << logs();
  EXPECT_NE(out.find("pulled"), std::string::npos) << out;
  const auto on_n1 = served_by("n1");
  ASSERT_TRUE(on_n1) << out << logs();

  // The internet is gone: the copy comes from n1.
  hub = process();
  ASSERT_EQ(hearth("models place " + k_model + " --to n2", out), 0) << out << logs();
  EXPECT_NE(out.find("placed " + k_model + " onto n2"), std::string::npos) << out;
  const auto on_n2 = served_by("n2");
  ASSERT_TRUE(on_n2) << logs();
  EXPECT_EQ(on_n2->digest, on_n1->digest);
  EXPECT_EQ(on_n2->source, on_n1->source) << "a copy keeps where the model came from";

  // /metrics: the model came from the internet once and over the LAN once.
  const double size = double(fs::file_size(testing::testdata_path("models/stories260K.gguf")));
  auto metrics = client_->request<wire::metrics_reply>(wire::get_metrics{});
  ASSERT_TRUE(metrics);
  std::map<std::string, double> bytes_from;
  for (const auto& f : metrics->families) {
    if (f.name != "hearth_model_transfer_bytes_total") continue;
    for (const auto& s : f.samples) bytes_from[s.labels.at(0)] = s.value;
  }
  EXPECT_EQ(bytes_from["internet"], size);
  EXPECT_EQ(bytes_from["peer"], size);

  auto models = client_->request<wire::models_reply>(wire::list_models{});
  ASSERT_TRUE(models);
  for (const auto& m : models->models) {
    if (m.name == k_model) {
      EXPECT_EQ(m.holders, (std::vector<std::string>{"n1", "n2"}));
    }
  }

  // Without n1, the job runs on n2.
  n1.signal(SIGKILL);
  n1.wait();
  auto s = testing::greedy_job(k_model, "Once upon a time", 16);
  s.watch = true;
  auto acc = client_->request<wire::accepted>(s);
  ASSERT_TRUE(acc) << logs();
  auto done = client_->follow(acc->job_id, 60s);
  ASSERT_TRUE(done.done) << logs();
  EXPECT_EQ(done.done->state, wire::job_state::completed) << done.done->error;
  auto detail = client_->wait_final(acc->job_id);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->summary.node, "n2");
}

}  // namespace
}  // namespace hearth
