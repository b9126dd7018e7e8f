// The web dashboard (issue 19) against a real cluster: a broker with keys and short heartbeats,
// two CPU nodes serving stories260K, a null-engine node serving a slow model (for a job long
// enough to watch and cancel), and hearth-gateway listening beyond loopback, so that API keys are
// required. Here, with curl: the dashboard's routes refuse bad input (400), unknown jobs (404),
// paths outside the bundle (404), requests without a key (401), and serve the page with its
// security headers. Then tests/dashboard/dashboard.test.mjs drives the page in Chromium
// (playwright-core, installed into the build folder by the fixture gateway_dashboard_npm) with an
// API key made by `hearth apikey create`, and saves screenshots under
// <build>/tests/artifacts/dashboard/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cluster.h"
#include "tests/fake-node.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using testing::cluster;
using testing::process;
using testing::shell_quote;

struct http_answer {
  int status = 0;
  std::string headers;  // lower-cased
  std::string body;
};

// One request with curl: `method` `path`, the API key when given.
http_answer http(int port, const std::string& method, const std::string& path,
                 const std::string& api_key = {}) {
  std::string cmd = "curl -s -i --max-time 10 -X " + method + " ";
  if (!api_key.empty()) cmd += "-H " + shell_quote("Authorization: Bearer " + api_key) + " ";
  // --path-as-is: curl would otherwise squash "/dashboard/../x" before sending it.
  cmd += "--path-as-is " + shell_quote("http://127.0.0.1:" + std::to_string(port) + path);
  auto r = testing::run_command(cmd);
  http_answer a;
  const size_t end = r.out.find("\r\n\r\n");
  if (end == std::string::npos) return a;
  a.headers = r.out.substr(0, end);
  for (auto& c : a.headers) c = char(std::tolower(static_cast<unsigned char>(c)));
  a.body = r.out.substr(end + 4);
  std::sscanf(a.headers.c_str(), "http/%*s %d", &a.status);
  return a;
}

class gateway_dashboard : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    c_ = new cluster(true);
    broker_ = new process(c_->start_broker());
    const std::string models = c_->models("models", {"stories260K"});
    alpha_ = new process(c_->start_node("alpha", models, "cpu", 1));
    beta_ = new process(c_->start_node("beta", models, "cpu", 1));
    const std::string slow = c_->models("slow", {"slow"});
    slow_ = new process(c_->start_node("slow", slow, "null", 1, {"--null-tokens-per-s", "8"}));
    auto admin = c_->client("admin", "dashboard-test");
    if (!testing::nodes_online(*admin, 3)) {
      ADD_FAILURE() << "the nodes did not come online";
      return;
    }
    // The API key, as an admin makes one: an admin key, which sees every owner's jobs.
    std::string cmd = shell_quote(HEARTH_BIN) + " apikey create dashboard --admin --broker " +
                      shell_quote(c_->endpoint());
    for (const auto& a : c_->key_args("admin", "dashboard-test")) cmd += " " + shell_quote(a);
    auto created = testing::run_command(cmd);
    if (created.exit_code != 0 || !created.out.starts_with("hk_")) {
      ADD_FAILURE() << "hearth apikey create: " << created.out << created.err;
      return;
    }
    api_key_ = new std::string(created.out.substr(0, created.out.find('\n')));
    // A job of another owner (a client certificate), which the admin key's page lists too.
    auto other = c_->client("client", "someone-else");
    auto job = other->request<wire::accepted>(testing::greedy_job("stories260K", "Lily", 8));
    if (!job || !other->wait_final(job->job_id)) {
      ADD_FAILURE() << "the other owner's job did not run";
      return;
    }
    other_job_ = job->job_id;

    // Beyond loopback, so that every request needs a key (gateway.cpp: keys_required).
    port_ = testing::free_port();
    // Two open dashboards at most, so that the cap is seen (live_snapshots_and_their_cap).
    const std::string config = c_->dir().file("gateway.yaml");
    std::ofstream(config) << "max_live_subscribers: 2\n";
    gateway_ = new process(c_->start_gateway(HEARTH_GATEWAY_BIN, "0.0.0.0:" + std::to_string(port_),
                                             {"--config", config}));
    const bool up = testing::wait_until([] { return http(port_, "GET", "/health").status == 200; },
                                        std::chrono::seconds(30));
    if (!up) ADD_FAILURE() << "the gateway did not answer /health:\n" << gateway_->log();
  }

  static void TearDownTestSuite() {
    for (process* p : {gateway_, slow_, beta_, alpha_, broker_}) delete p;
    delete api_key_;
    delete c_;
  }

  void SetUp() override {
    if (!api_key_ || !gateway_) GTEST_SKIP() << "the cluster did not start (see above)";
  }

  // Runs tests/dashboard/`script` with node and Chromium, `vars` in its environment beside the
  // packages' and the browser's; prints what it wrote.
  static testing::process_result run_browser_script(
      const std::string& script, std::vector<std::pair<std::string, std::string>> vars) {
    vars.emplace_back("HEARTH_DASHBOARD_NODE", HEARTH_DASHBOARD_NODE);
    vars.emplace_back("HEARTH_CHROMIUM", "/usr/bin/chromium");
    std::string cmd = "env";
    for (const auto& [name, value] : vars) cmd += " " + name + "=" + shell_quote(value);
    cmd += " node " + shell_quote(std::string(HEARTH_SOURCE_DIR) + "/tests/dashboard/" + script);
    auto r = testing::run_command(cmd);
    std::printf("%s\n", r.out.c_str());
    return r;
  }

  static std::string logs() {
    return testing::logs_of({{"gateway", gateway_},
                             {"broker", broker_},
                             {"alpha", alpha_},
                             {"beta", beta_},
                             {"slow", slow_}});
  }

  static inline cluster* c_ = nullptr;
  static inline process *broker_ = nullptr, *alpha_ = nullptr, *beta_ = nullptr, *slow_ = nullptr,
                        *gateway_ = nullptr;
  static inline std::string* api_key_ = nullptr;
  static inline int port_ = 0;
  static inline uint64_t other_job_ = 0;
};

TEST_F(gateway_dashboard, the_page_is_served_with_its_security_headers) {
  auto root = http(port_, "GET", "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_NE(root.headers.find("location: /dashboard/"), std::string::npos) << root.headers;

  auto page = http(port_, "GET", "/dashboard/");  // public: no key
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.headers.find("content-type: text/html; charset=utf-8"), std::string::npos);
  EXPECT_NE(page.headers.find("content-security-policy: default-src 'none'; script-src 'self';"),
            std::string::npos)
      << page.headers;
  EXPECT_NE(page.headers.find("x-content-type-options: nosniff"), std::string::npos);
  EXPECT_NE(page.body.find("<script src=\"app.js\"></script>"), std::string::npos) << page.body;
  auto js = http(port_, "GET", "/dashboard/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_NE(js.headers.find("content-type: text/javascript"), std::string::npos);
  EXPECT_GT(js.body.size(), 10000u);
  auto css = http(port_, "GET", "/dashboard/app.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_NE(css.headers.find("content-type: text/css"), std::string::npos);
}

TEST_F(gateway_dashboard, bad_input_is_refused_clearly) {
  const std::string& key = *api_key_;
  // Paths outside the bundle: nothing is read from the file system, so only names it holds exist.
  for (std::string path :
       {"/dashboard/../x", "/dashboard/..%2F..%2Fetc%2Fpasswd", "/dashboard/nope.js",
        "/dashboard/%2e%2e/CMakeLists.txt", "/dashboard/a/b"}) {
    EXPECT_EQ(http(port_, "GET", path).status, 404) << path;
  }
  // Without a key: 401, the page itself aside.
  for (std::string path : {"/v1/hearth/live", "/v1/hearth/jobs/1/events", "/v1/hearth/jobs"}) {
    auto a = http(port_, "GET", path);
    EXPECT_EQ(a.status, 401) << path << ": " << a.body;
  }
  EXPECT_EQ(http(port_, "POST", "/v1/hearth/jobs/1/cancel").status, 401);
  // Bad ids: 400 naming the parameter.
  for (std::string id : {"0", "abc", "-1", "1.5", "cmpl-", "99999999999999999999999"}) {
    auto cancel = http(port_, "POST", "/v1/hearth/jobs/" + id + "/cancel", key);
    EXPECT_EQ(cancel.status, 400) << id << ": " << cancel.body;
    EXPECT_NE(cancel.body.find("\"param\":\"id\""), std::string::npos) << cancel.body;
    auto events = http(port_, "GET", "/v1/hearth/jobs/" + id + "/events", key);
    EXPECT_EQ(events.status, 400) << id << ": " << events.body;
  }
  // Unknown jobs: 404 in OpenAI's error shape.
  auto cancel = http(port_, "POST", "/v1/hearth/jobs/987654/cancel", key);
  EXPECT_EQ(cancel.status, 404) << cancel.body;
  EXPECT_NE(cancel.body.find("\"error\""), std::string::npos) << cancel.body;
  auto events = http(port_, "GET", "/v1/hearth/jobs/cmpl-987654/events", key);
  EXPECT_EQ(events.status, 404) << events.body;
  EXPECT_EQ(http(port_, "GET", "/v1/hearth/live?x=1", key).status, 400);
}

// GET /v1/hearth/live: snapshots for the caller, and no more subscribers than the cap.
TEST_F(gateway_dashboard, live_snapshots_and_their_cap) {
  const std::string live_url = "http://127.0.0.1:" + std::to_string(port_) + "/v1/hearth/live";
  const std::string auth = "-H " + shell_quote("Authorization: Bearer " + *api_key_) + " ";
  std::vector<process> open;
  std::vector<std::string> outs;
  for (int i = 0; i < 2; ++i) {
    outs.push_back(c_->dir().file("live-" + std::to_string(i) + ".sse"));
    open.push_back(testing::spawn({"/bin/sh", "-c",
                                   "exec curl -sN --max-time 60 " + auth + shell_quote(live_url) +
                                       " > " + shell_quote(outs.back())},
                                  c_->dir().file("live-curl.log")));
  }
  // Each gets snapshots naming the nodes and the caller's key.
  for (const auto& out : outs) {
    ASSERT_TRUE(testing::wait_until([&] {
      // The shell makes the file when curl starts, which a loaded machine may not have done yet.
      if (!std::filesystem::exists(out)) return false;
      const std::string text = testing::read_file_text(out);
      return text.find("\"type\":\"snapshot\"") != std::string::npos &&
             text.find("\"name\":\"dashboard\"") != std::string::npos &&
             text.find("\"name\":\"alpha\"") != std::string::npos &&
             text.find("\"name\":\"slow\"") != std::string::npos;
    })) << testing::read_file_text(out)
        << logs();
  }
  auto third = http(port_, "GET", "/v1/hearth/live", *api_key_);
  EXPECT_EQ(third.status, 503) << third.body;
  EXPECT_NE(third.body.find("too_many_subscribers"), std::string::npos) << third.body;
  // Dashboards that close make room.
  open.clear();
  EXPECT_TRUE(testing::wait_until([&] {
    auto r = testing::run_command("curl -s --max-time 2 -o /dev/null -w '%{http_code}' " + auth +
                                  shell_quote(live_url));
    return r.out == "200";
  })) << logs();
}

TEST_F(gateway_dashboard, in_a_browser) {
  const std::string artifacts = std::string(HEARTH_BINARY_DIR) + "/tests/artifacts/dashboard";
  fs::create_directories(artifacts);
  const std::string reference = testing::testdata_path("reference/stories260K.json");
  ASSERT_FALSE(reference.empty());
  // A node quarantined for failing its model's only job three times by its own fault (issue 52):
  // the page says why and until when. Then it goes silent; the quarantine (60 s) outlasts the run.
  testing::fake_node flaky(*c_, "flaky");
  flaky.hello(1, {"flaky-model"});
  ASSERT_TRUE(flaky.next<wire::node_welcome>()) << logs();
  flaky.send(wire::node_pull{1});
  auto admin = c_->client("admin", "dashboard-test");
  ASSERT_TRUE(admin->request<wire::accepted>(testing::greedy_job("flaky-model", "x", 4)));
  for (int i = 0; i < 3; ++i) {
    auto a = flaky.next<wire::job_assign>();
    ASSERT_TRUE(a) << logs();
    flaky.send(wire::job_final{a->job_id, a->attempt, wire::job_state::failed, "",
                               "the model does not load here"});
    flaky.send(wire::node_pull{1});
  }
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"HEARTH_GATEWAY_URL", "http://127.0.0.1:" + std::to_string(port_)},
      {"HEARTH_API_KEY", *api_key_},
      {"HEARTH_OTHER_JOB", std::to_string(other_job_)},
      {"HEARTH_REFERENCE", reference},
      {"HEARTH_NODE_PIDS", nlohmann::json{{"alpha", alpha_->pid()}, {"beta", beta_->pid()}}.dump()},
      {"HEARTH_ARTIFACTS", artifacts},
  };
  auto r = run_browser_script("dashboard.test.mjs", vars);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << logs();
}

// Issue 52: a second gateway, on loopback where it asks for no key, in Chromium: a page of another
// origin cannot make a job (a text/plain POST needs no preflight), a name that resolves to
// 127.0.0.1 (DNS rebinding) is not answered, and the dashboard of its own origin still works.
TEST_F(gateway_dashboard, a_page_of_another_origin_cannot_use_a_gateway_without_keys) {
  const int port = testing::free_port();
  process keyless = c_->start_gateway(HEARTH_GATEWAY_BIN, "127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(testing::wait_until([&] { return http(port, "GET", "/health").status == 200; },
                                  std::chrono::seconds(30)))
      << keyless.log();
  auto r = run_browser_script("cross-origin.test.mjs",
                              {{"HEARTH_KEYLESS_URL", "http://127.0.0.1:" + std::to_string(port)},
                               {"HEARTH_MODEL", "slow"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << keyless.log();
}

}  // namespace
}  // namespace hearth
