// Issue 19: the gateway's GET /metrics against a real broker (with keys) and null-engine nodes:
// every scrape passes `promtool check metrics` (Debian's prometheus package); after 100 jobs that
// complete, fail and are cancelled, the counters equal what `hearth jobs --json` lists; a node
// killed with SIGKILL shows offline, with missed heartbeats and its job's requeue; jobs waiting
// for it show in the queue gauges; API keys are checked. The last scrape is kept as an artifact
// (tests/artifacts/metrics/).
#include <gtest/gtest.h>
#include <signal.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/gateway-thread.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// One scrape: every series line as written ("name{labels}" -> value).
struct scrape {
  int status = 0;
  std::string text;
  std::map<std::string, double> series;

  // The sum over the series of `name` whose labels include every `match` ("model=\"alpha\"").
  double sum(const std::string& name, const std::vector<std::string>& match = {}) const {
    double total = 0;
    for (const auto& [key, v] : series) {
      const auto brace = key.find('{');
      if (key.substr(0, brace) != name) continue;
      const std::string labels = brace == std::string::npos ? "" : key.substr(brace);
      bool all = true;
      for (const auto& m : match) all = all && labels.find(m) != std::string::npos;
      if (all) total += v;
    }
    return total;
  }
  bool has(const std::string& name) const {
    for (const auto& [key, v] : series) {
      if (key.substr(0, key.find('{')) == name) return true;
    }
    return false;
  }
};

// `s` with every `from` replaced by `to`. (No std::regex: GCC 12's -Wmaybe-uninitialized misfires
// inside it in the sanitizer build.)
std::string replaced(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The metric names in a PromQL expression: every "hearth_" and the [a-z_] that follow.
std::vector<std::string> metric_names(const std::string& expr) {
  std::vector<std::string> out;
  for (size_t at = expr.find("hearth_"); at != std::string::npos; at = expr.find("hearth_", at)) {
    size_t end = at;
    while (end < expr.size() &&
           (std::islower(static_cast<unsigned char>(expr[end])) || expr[end] == '_')) {
      ++end;
    }
    out.push_back(expr.substr(at, end - at));
    at = end;
  }
  return out;
}

class metrics_test : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short outputs fail: a job of more than about 900 words passes max_output_bytes.
    // A node is dead after 5 s without a heartbeat (liveness 25 at 200 ms), so that a node stopped
    // for a moment (counters_equal_the_job_history_after_100_jobs) stays online.
    c_.broker_settings({{"max_output_bytes", "4096"}, {"liveness", "25"}});
    broker_ = c_.start_broker();
    admin_ = c_.client("admin");
  }

  void start_nodes(int rate) {
    a_ = c_.start_node("node-a", c_.models("ma", {"alpha", "beta"}), "null", 2,
                       {"--null-tokens-per-s", std::to_string(rate)});
    b_ = c_.start_node("node-b", c_.models("mb", {"alpha"}), "null", 2,
                       {"--null-tokens-per-s", std::to_string(rate)});
    ASSERT_TRUE(nodes_online(*admin_, 2)) << broker_.log() << a_.log() << b_.log();
  }

  void start_gateway() {
    gateway::gateway_options o;
    o.listen = "127.0.0.1:0";
    o.broker = c_.endpoint();
    o.broker_key = c_.broker_public();
    o.key = c_.key("client", "gateway");
    o.db = c_.dir().file("gateway.db");
    gw_ = std::make_unique<testing::gateway_thread>(o);
    ASSERT_TRUE(wait_until([&] { return gw_->bound(); }, 10s));
    wire::create_api_key k;
    k.name = "prometheus";
    std::string why;
    auto r = admin_->request<wire::api_key_created>(k, &why);
    ASSERT_TRUE(r) << why;
    key_ = r->key;
  }

  // GET /metrics with `key` (as Prometheus's `authorization: credentials` sends it); a 200 must
  // pass promtool.
  scrape get(const std::string& key) {
    const std::string out = c_.dir().file("metrics-" + std::to_string(n_++) + ".txt");
    std::string cmd = "curl -sS --max-time 30 -o " + testing::shell_quote(out) +
                      " -w '%{http_code}' " + testing::shell_quote(gw_->url() + "/metrics");
    if (!key.empty()) cmd += " -H " + testing::shell_quote("Authorization: Bearer " + key);
    auto r = testing::run_command(cmd);
    scrape s;
    EXPECT_EQ(r.exit_code, 0) << r.err;
    s.status = std::atoi(r.out.c_str());
    s.text = testing::read_file_text(out);
    if (s.status != 200) return s;
    const auto check =
        testing::run_command("promtool check metrics < " + testing::shell_quote(out));
    EXPECT_EQ(check.exit_code, 0) << "promtool check metrics: " << check.out << check.err;
    std::istringstream in(s.text);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const auto space = line.rfind(' ');
      s.series[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    last_ = out;
    return s;
  }

  // `hearth jobs --json`, as the admin.
  json cli_jobs() {
    std::string cmd = std::string(HEARTH_BIN) + " jobs --json --limit 1000 --broker " +
                      testing::shell_quote(c_.endpoint());
    for (const auto& a : c_.key_args("admin", "default")) cmd += " " + testing::shell_quote(a);
    auto r = testing::run_command(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }

  void TearDown() override {
    if (last_.empty()) return;
    const std::string dir = std::string(HEARTH_ARTIFACTS) + "/metrics";
    std::filesystem::create_directories(dir);
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::copy_file(last_, dir + "/" + name + ".txt",
                               std::filesystem::copy_options::overwrite_existing);
    std::printf("metrics scrape kept in %s/%s.txt\n", dir.c_str(), name.c_str());
  }

  cluster c_;
  testing::process broker_, a_, b_;
  std::unique_ptr<testing::test_client> admin_;
  std::unique_ptr<testing::gateway_thread> gw_;
  std::string key_, last_;
  int n_ = 0;
};

TEST_F(metrics_test, counters_equal_the_job_history_after_100_jobs) {
  start_nodes(4000);
  start_gateway();
  const scrape before = get(key_);
  ASSERT_EQ(before.status, 200) << before.text;
  EXPECT_EQ(before.sum("hearth_jobs_submitted_total"), 0);
  EXPECT_EQ(before.sum("hearth_nodes", {"state=\"online\""}), 2) << before.text;
  EXPECT_EQ(before.sum("hearth_node_slots", {"node=\"node-a\""}), 2);
  // Every model a node serves has a series (1 loaded, 0 on disk only).
  EXPECT_TRUE(before.series.count("hearth_node_model_loaded{node=\"node-a\",model=\"beta\"}"))
      << before.text;
  EXPECT_TRUE(before.series.count("hearth_node_model_loaded{node=\"node-b\",model=\"alpha\"}"))
      << before.text;
  EXPECT_EQ(before.sum("hearth_gateway_broker_up"), 1);

  // 100 jobs: 60 alpha and 25 beta that complete, 5 whose output passes max_output_bytes (fail),
  // and 10 cancelled while they run or wait. Both nodes are stopped (SIGSTOP) while those 10 are
  // submitted and cancelled, so none can end first: at 4000 tokens/s a job of 20 ends in 5 ms,
  // and under AddressSanitizer all 10 once ended before their cancels arrived.
  std::vector<uint64_t> ids, long_ids;
  for (int i = 0; i < 100; ++i) {
    if (i == 90) a_.signal(SIGSTOP), b_.signal(SIGSTOP);
    const bool beta = i % 4 == 1 && i < 100 - 15;
    auto job = testing::greedy_job(beta ? "beta" : "alpha", "job " + std::to_string(i), 6);
    if (i >= 85 && i < 90) job.params.max_tokens = 2000;         // fails
    if (i >= 90) job.params.max_tokens = 20, job.priority = -5;  // cancelled while they wait
    std::string why;
    auto r = admin_->request<wire::accepted>(job, &why);
    ASSERT_TRUE(r) << why;
    (i >= 90 ? long_ids : ids).push_back(r->job_id);
  }
  for (uint64_t id : long_ids) {
    wire::cancel c;
    c.job_id = id;
    std::string why;
    EXPECT_TRUE(admin_->request<wire::ok>(c, &why)) << why;
  }
  a_.signal(SIGCONT), b_.signal(SIGCONT);
  std::map<std::pair<std::string, std::string>, int> by_model_state;
  std::map<std::string, int> submitted;
  std::map<std::string, double> tokens;
  for (uint64_t id : ids) ASSERT_TRUE(admin_->wait_final(id)) << id;
  for (uint64_t id : long_ids) ASSERT_TRUE(admin_->wait_final(id)) << id;

  // What `hearth jobs` lists, against the counters.
  const json jobs = cli_jobs();
  ASSERT_TRUE(jobs.is_array());
  ASSERT_EQ(jobs.size(), 100u);
  for (const auto& j : jobs) {
    ++by_model_state[{j["model"], j["state"]}];
    ++submitted[j["model"]];
    tokens[j["model"]] += j["n_gen"].get<double>();
  }
  EXPECT_GE((by_model_state[{"alpha", "failed"}]), 5);
  EXPECT_EQ((by_model_state[{"alpha", "cancelled"}]), 10);
  const scrape after = get(key_);
  ASSERT_EQ(after.status, 200) << after.text;
  for (const auto& [model, n] : submitted) {
    EXPECT_EQ(after.sum("hearth_jobs_submitted_total", {"model=\"" + model + "\""}), n) << model;
    EXPECT_EQ(after.sum("hearth_tokens_generated_total", {"model=\"" + model + "\""}),
              tokens[model])
        << model;
  }
  for (const auto& [ms, n] : by_model_state) {
    EXPECT_EQ(after.sum("hearth_jobs_finished_total",
                        {"model=\"" + ms.first + "\"", "state=\"" + ms.second + "\""}),
              n)
        << ms.first << " " << ms.second << "\n"
        << after.text;
  }
  EXPECT_EQ(after.sum("hearth_jobs_finished_total"), 100);
  EXPECT_EQ(after.sum("hearth_job_duration_seconds_count"), 100);
  EXPECT_EQ(after.sum("hearth_job_duration_seconds_bucket", {"le=\"+Inf\""}), 100);
  // Every assignment waited in the queue once (a job cancelled while waiting never was).
  EXPECT_GE(after.sum("hearth_job_queue_wait_seconds_count"), 90);
  EXPECT_GE(after.sum("hearth_job_time_to_first_token_seconds_count"), 90);
  EXPECT_EQ(after.sum("hearth_job_requeues_total"), 0);
  // Both nodes ran some; the per-node token counters add up to the per-model ones.
  EXPECT_GT(after.sum("hearth_tokens_generated_total", {"node=\"node-a\""}), 0);
  EXPECT_GT(after.sum("hearth_tokens_generated_total", {"node=\"node-b\""}), 0);
  EXPECT_EQ(after.sum("hearth_queue_depth"), 0);
  EXPECT_EQ(after.sum("hearth_jobs_running"), 0);
  EXPECT_GT(after.sum("hearth_broker_messages_received_total", {"command=\"submit\""}), 99);
  EXPECT_GT(after.sum("hearth_broker_messages_sent_total", {"command=\"job_assign\""}), 89);
  EXPECT_GT(after.sum("hearth_store_commit_duration_seconds_count"), 0);
  EXPECT_GT(after.sum("hearth_broker_turn_duration_seconds_count"), 0);
  EXPECT_TRUE(after.has("hearth_store_wal_bytes"));
  EXPECT_GE(after.sum("hearth_broker_connections"), 4);  // two nodes, the gateway, the admin
  EXPECT_GE(after.sum("hearth_gateway_http_responses_total", {"code=\"200\""}), 1);
}

TEST_F(metrics_test, a_killed_node_goes_offline_and_its_jobs_show) {
  start_nodes(20);
  start_gateway();
  // A long job on each node (two slots each, four jobs: every slot busy).
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    auto r = admin_->request<wire::accepted>(
        testing::greedy_job("alpha", "long " + std::to_string(i), 400));
    ASSERT_TRUE(r);
    ids.push_back(r->job_id);
  }
  scrape s;
  ASSERT_TRUE(wait_until([&] {
    s = get(key_);
    return s.sum("hearth_node_busy_slots") == 4 && s.sum("hearth_jobs_running") == 4;
  })) << s.text;
  EXPECT_TRUE(wait_until([&] {
    s = get(key_);
    return s.sum("hearth_node_tokens_per_second", {"node=\"node-a\""}) > 0;
  })) << s.text;
  // node-a goes away without a word; its two jobs go back to the queue, behind node-b's.
  a_.signal(SIGKILL);
  ASSERT_TRUE(wait_until(
      [&] {
        s = get(key_);
        return s.sum("hearth_node_up", {"node=\"node-a\""}) == 0;
      },
      20s))
      << s.text;
  EXPECT_EQ(s.sum("hearth_nodes", {"state=\"offline\""}), 1);
  EXPECT_GE(s.sum("hearth_node_heartbeats_missed_total", {"node=\"node-a\""}), 1) << s.text;
  EXPECT_EQ(s.sum("hearth_job_requeues_total", {"cause=\"node\""}), 2) << s.text;
  EXPECT_EQ(s.sum("hearth_queue_depth", {"model=\"alpha\"", "priority=\"0\""}), 2) << s.text;
  // beta: only node-a served it, so these wait.
  for (int i = 0; i < 3; ++i) {
    auto job = testing::greedy_job("beta", "waits", 4);
    job.priority = 7;
    ASSERT_TRUE(admin_->request<wire::accepted>(job));
  }
  std::this_thread::sleep_for(1100ms);
  s = get(key_);
  EXPECT_EQ(s.sum("hearth_queue_depth", {"model=\"beta\"", "priority=\"7\""}), 3) << s.text;
  EXPECT_GE(s.sum("hearth_queue_oldest_age_seconds", {"model=\"beta\"", "priority=\"7\""}), 1)
      << s.text;
  for (uint64_t id : ids) {
    wire::cancel c;
    c.job_id = id;
    admin_->request<wire::ok>(c);
  }
}

TEST_F(metrics_test, keys_are_checked_and_a_missing_broker_is_reported) {
  start_nodes(1000);
  start_gateway();
  // A key the broker does not know is counted. On loopback, where no key is needed, it is no key
  // (a client's placeholder: the scrape is the gateway's own).
  EXPECT_EQ(get("hk_not-a-key").status, 200);
  scrape s = get(key_);
  ASSERT_EQ(s.status, 200);
  EXPECT_GE(s.sum("hearth_auth_failures_total", {"reason=\"api_key\""}), 1) << s.text;
  // A stranger's CURVE key never gets in.
  {
    testing::test_client t(c_.endpoint(), c_.client_keys("client", "unknown", false));
    t.request<wire::nodes_reply>(wire::list_nodes{});
  }
  EXPECT_TRUE(wait_until([&] {
    s = get(key_);
    return s.sum("hearth_auth_failures_total", {"reason=\"unknown_key\""}) >= 1;
  })) << s.text;
  // Without the broker: the gateway's own identity, checked within the 2 s it is remembered (a
  // scrape without a key, on loopback), still scrapes the gateway's own figures, which say the
  // broker did not answer; a key, checked at every request, is answered 503, as every route
  // answers then.
  std::this_thread::sleep_for(2100ms);
  ASSERT_EQ(get("").status, 200);  // the gateway's identity is checked again now
  broker_.signal(SIGKILL);
  broker_.wait();
  s = get("");
  EXPECT_EQ(s.status, 200) << s.text;
  EXPECT_EQ(s.sum("hearth_gateway_broker_up"), 0) << s.text;
  EXPECT_FALSE(s.has("hearth_jobs_submitted_total"));
  for (const std::string& key : {key_, std::string("hk_never-seen")}) {
    const scrape unchecked = get(key);
    EXPECT_EQ(unchecked.status, 503) << unchecked.text;
    EXPECT_NE(unchecked.text.find("broker_unavailable"), std::string::npos) << unchecked.text;
  }
}

// A node's devices as it last said (node_status.hardware: free memory and utilisation change
// while it runs) become gauges; a node without GPU utilisation has no such series.
TEST_F(metrics_test, a_nodes_devices_show_as_it_last_said) {
  start_gateway();
  testing::fake_node gpu_node(c_, "gpu-box");
  gpu_node.hello(2, {"alpha"});
  ASSERT_TRUE(gpu_node.welcomed());
  scrape s = get(key_);
  const std::string dev = "node=\"gpu-box\",device=\"0\",backend=\"cuda\",name=\"imaginary GPU\"";
  EXPECT_EQ(s.sum("hearth_device_memory_total_bytes", {dev}), double(80ull << 30)) << s.text;
  EXPECT_FALSE(s.has("hearth_device_utilization_ratio")) << "the hello said nothing of it";

  wire::node_status st;
  wire::model_info m;
  m.name = "alpha";
  m.architecture = "llama";
  m.loaded = true;
  st.models = {m};
  st.hardware.cpu_model = "claims to be fast";
  st.hardware.cpu_threads = 1024;
  st.hardware.memory_total = 1ull << 40;
  st.hardware.memory_available = 3ull << 30;
  st.hardware.gpus.push_back({"cuda", "imaginary GPU", 80ull << 30, 12ull << 30});
  st.hardware.gpus.back().utilization = 0.75;
  gpu_node.send(st);
  EXPECT_TRUE(wait_until([&] {
    s = get(key_);
    return s.sum("hearth_device_utilization_ratio", {dev}) == 0.75;
  })) << s.text;
  EXPECT_EQ(s.sum("hearth_device_memory_free_bytes", {dev}), double(12ull << 30));
  EXPECT_EQ(s.sum("hearth_node_memory_available_bytes", {"node=\"gpu-box\""}), double(3ull << 30));
  // An older node's status (no hardware) keeps what the broker knew.
  wire::node_status old;
  old.models = {m};
  gpu_node.send(old);
  gpu_node.send(wire::heartbeat{});
  std::this_thread::sleep_for(300ms);
  s = get(key_);
  EXPECT_EQ(s.sum("hearth_device_memory_free_bytes", {dev}), double(12ull << 30)) << s.text;
}

// deploy/grafana: the dashboard's queries parse (promtool check rules, as recording rules) and
// name only metrics /metrics serves; the example scrape job is a valid Prometheus configuration.
TEST_F(metrics_test, the_grafana_dashboard_and_scrape_job_fit_the_metrics) {
  start_nodes(1000);
  start_gateway();
  ASSERT_TRUE(admin_->request<wire::accepted>(testing::greedy_job("alpha", "one", 4)));
  const scrape s = get(key_);
  ASSERT_EQ(s.status, 200);
  std::set<std::string> served;
  std::istringstream in(s.text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("# TYPE ")) served.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  const json dash = json::parse(
      testing::read_file_text(std::string(HEARTH_SOURCE_DIR) + "/deploy/grafana/hearth.json"));
  std::string rules = "groups:\n  - name: hearth-dashboard\n    rules:\n";
  int n = 0;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      // Grafana's variable, as a scrape interval Prometheus knows.
      expr = replaced(expr, "$__rate_interval", "5m");
      rules += "      - record: hearth:dashboard_" + std::to_string(n++) + "\n        expr: '" +
               expr + "'\n";
      for (std::string metric : metric_names(expr)) {
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          if (metric.ends_with(suffix) && !served.contains(metric)) {
            metric.resize(metric.size() - std::string(suffix).size());
          }
        }
        // Utilisation exists only where a GPU driver reports it; everything else is always there.
        if (metric == "hearth_device_utilization_ratio") continue;
        EXPECT_TRUE(served.contains(metric)) << panel["title"] << ": " << metric;
      }
    }
  }
  EXPECT_GE(n, 15);
  const std::string rules_file = c_.dir().file("dashboard-rules.yml");
  std::ofstream(rules_file) << rules;
  auto checked = testing::run_command("promtool check rules " + testing::shell_quote(rules_file));
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err << rules;

  // The example scrape job, with its credentials file where this test can make one.
  std::string config = testing::read_file_text(std::string(HEARTH_SOURCE_DIR) +
                                               "/deploy/grafana/prometheus.example.yml");
  const std::string key_file = c_.dir().file("hearth-api-key");
  std::ofstream(key_file) << key_;
  config = replaced(config, "/etc/prometheus/hearth-api-key", key_file);
  const std::string config_file = c_.dir().file("prometheus.yml");
  std::ofstream(config_file) << config;
  checked = testing::run_command("promtool check config " + testing::shell_quote(config_file));
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
}

}  // namespace
}  // namespace hearth::testing
