// The OpenAI API end to end: a real broker (with keys), a CPU node serving stories260K and a chat
// variant of it, null-engine nodes serving slow models, and hearth-gateway in front, all as
// processes on loopback. The official OpenAI client from npm and curl drive it from
// tests/openai/*.test.* (node --test; packages installed into the build folder by the ctest
// fixture gateway_openai_npm). Here, beside them: failover under a stream (a node killed
// mid-stream, the client's text whole and without repeats). Tool calls, structured output,
// logprobs and n (tests/openai/tools.test.cjs) run on a random-weight qwen3 carrying Qwen2.5's
// real chat template, which offers tools and writes calls as <tool_call> JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <thread>

#include "engine/io/gguf-writer.h"
#include "engine/io/gguf.h"
#include "schema/codec.h"
#include "tests/cluster.h"
#include "tests/model-variant.h"
#include "tests/process.h"
#include "tests/testdata.h"

namespace hearth {
namespace {

namespace fs = std::filesystem;
using testing::cluster;
using testing::process;
using testing::shell_quote;

// The gateway's answer to GET `path`: "<status> <body>" (curl; status 000 when nothing answers).
std::string http_get(int port, const std::string& path, const std::string& api_key = {}) {
  std::string cmd = "curl -s --max-time 10 -w ' %{http_code}' ";
  if (!api_key.empty()) cmd += "-H " + shell_quote("Authorization: Bearer " + api_key) + " ";
  cmd += shell_quote("http://127.0.0.1:" + std::to_string(port) + path);
  auto r = testing::run_command(cmd);
  const size_t sp = r.out.rfind(' ');
  if (sp == std::string::npos) return "000";
  return r.out.substr(sp + 1) + " " + r.out.substr(0, sp);
}

// A copy of the GGUF model `src` whose tokenizer.chat_template is the text of `template_file`, as
// `hearth convert IN OUT --chat-template FILE` writes it; its path ("" after a failure).
std::string write_with_template(const std::string& src, const std::string& template_file,
                                const std::string& name) {
  auto f = gguf_file::open(src);
  if (!f.ok()) {
    ADD_FAILURE() << src << ": " << f.message();
    return "";
  }
  std::ifstream t(template_file);
  std::stringstream text;
  text << t.rdbuf();
  if (!t || text.str().empty()) {
    ADD_FAILURE() << "cannot read " << template_file;
    return "";
  }
  gguf_writer w;
  w.copy_metadata_from(*f);
  w.set_string("tokenizer.chat_template", text.str());
  for (const auto& tensor : f->tensors()) {
    w.add_tensor(tensor.name, tensor.type,
                 std::vector<int64_t>(tensor.ne, tensor.ne + tensor.n_dims),
                 std::span(tensor.data, tensor.n_bytes));
  }
  const std::string out = ::testing::TempDir() + "hearth_" + name + ".gguf";
  auto r = w.write_file(out);
  if (!r.ok()) {
    ADD_FAILURE() << out << ": " << r.message();
    return "";
  }
  return out;
}

class gateway_openai : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    c_ = new cluster(true);
    broker_ = new process(c_->start_broker());
    const std::string models = c_->models("models", {"stories260K"});
    chat_path_ = new std::string(testing::write_stories_variant(
        "gateway_chatml", {.metadata = [](gguf_writer& w) {
          w.set_string("tokenizer.chat_template", testing::k_chatml_template);
        }}));
    testing::link_model(models, "stories-chat", *chat_path_);
    tools_path_ = new std::string(write_with_template(
        testing::testdata_path("models/synthetic2/synthetic-qwen3-a.q4_k_m.gguf"),
        testing::testdata_path("chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja"),
        "gateway_qwen3_tools"));
    testing::link_model(models, "qwen3-tools", *tools_path_);
    cpu_ = new process(c_->start_node("cpu", models, "cpu", 2));
    // The null engine's models: "slow" for a client that disconnects, "relay" served by two
    // nodes for failover under a stream.
    const std::string slow = c_->chat_models("slow", {"slow"});
    null_ = new process(c_->start_node("null", slow, "null", 2, {"--null-tokens-per-s", "20"}));
    const std::string relay = c_->chat_models("relay", {"relay"});
    relay_a_ =
        new process(c_->start_node("relay-a", relay, "null", 1, {"--null-tokens-per-s", "40"}));
    relay_b_ =
        new process(c_->start_node("relay-b", relay, "null", 1, {"--null-tokens-per-s", "40"}));
    admin_ = c_->client("admin", "openai-test").release();
    if (!testing::nodes_online(*admin_, 4)) {
      ADD_FAILURE() << "the nodes did not come online";
      return;
    }

    // An API key, as an admin makes one (hearth apikey create).
    wire::create_api_key k;
    k.name = "openai-test";
    std::string error;
    auto created = admin_->request<wire::api_key_created>(k, &error);
    if (!created) {
      ADD_FAILURE() << "create_api_key: " << error;
      return;
    }
    api_key_ = new std::string(created->key);

    port_ = testing::free_port();
    gateway_ =
        new process(c_->start_gateway(HEARTH_GATEWAY_BIN, "127.0.0.1:" + std::to_string(port_)));
    const bool up = testing::wait_until(
        [] { return http_get(port_, "/health").starts_with("200"); }, std::chrono::seconds(30));
    if (!up) ADD_FAILURE() << "the gateway did not answer /health:\n" << gateway_->log();
  }

  static void TearDownTestSuite() {
    for (process* p : {gateway_, relay_b_, relay_a_, null_, cpu_, broker_}) delete p;
    delete admin_;
    delete api_key_;
    for (std::string* path : {chat_path_, tools_path_}) {
      if (path && !path->empty()) fs::remove(*path);
      delete path;
    }
    delete c_;
  }

  void SetUp() override {
    if (!api_key_ || !gateway_) GTEST_SKIP() << "the cluster did not start (see above)";
  }

  // The logs of every process, for a failure.
  static std::string logs() {
    return testing::logs_of({{"gateway", gateway_}, {"broker", broker_}, {"cpu", cpu_}});
  }

  static std::string url() { return "http://127.0.0.1:" + std::to_string(port_); }

  static inline cluster* c_ = nullptr;
  static inline process *broker_ = nullptr, *cpu_ = nullptr, *null_ = nullptr;
  static inline process *relay_a_ = nullptr, *relay_b_ = nullptr, *gateway_ = nullptr;
  static inline testing::test_client* admin_ = nullptr;
  static inline std::string* api_key_ = nullptr;
  static inline std::string* chat_path_ = nullptr;
  static inline std::string* tools_path_ = nullptr;  // qwen3 with Qwen2.5's template
  static inline int port_ = 0;
};

TEST_F(gateway_openai, the_official_client_and_curl) {
  std::vector<std::string> scripts;
  for (const auto& e : fs::directory_iterator(std::string(HEARTH_SOURCE_DIR) + "/tests/openai")) {
    const std::string name = e.path().filename().string();
    // HEARTH_OPENAI_SCRIPTS=tools runs only the scripts whose name holds "tools" (a developer's
    // shortcut; unset: all of them).
    const char* only = std::getenv("HEARTH_OPENAI_SCRIPTS");
    if (only && name.find(only) == std::string::npos) continue;
    if (name.find(".test.") != std::string::npos) scripts.push_back(e.path().string());
  }
  std::sort(scripts.begin(), scripts.end());
  ASSERT_FALSE(scripts.empty());
  std::string cmd = "env";
  const std::string admin_args = nlohmann::json([&] {
                                   std::vector<std::string> a = {"--broker", c_->endpoint()};
                                   const auto k = c_->key_args("admin", "openai-test");
                                   a.insert(a.end(), k.begin(), k.end());
                                   return a;
                                 }())
                                     .dump();
  const std::pair<const char*, std::string> vars[] = {
      {"NODE_PATH", std::string(HEARTH_OPENAI_NODE) + "/node_modules"},
      {"HEARTH_GATEWAY_URL", url()},
      {"HEARTH_API_KEY", *api_key_},
      {"HEARTH_MODEL_TEXT", "stories260K"},
      {"HEARTH_MODEL_CHAT", "stories-chat"},
      {"HEARTH_MODEL_TOOLS", "qwen3-tools"},
      {"HEARTH_MODEL_SLOW", "slow"},
      {"HEARTH_MODEL_TEXT_PATH", testing::testdata_path("models/stories260K.gguf")},
      {"HEARTH_MODEL_CHAT_PATH", *chat_path_},
      {"HEARTH_BIN", HEARTH_BIN},
      {"HEARTH_ADMIN_ARGS", admin_args},
  };
  for (const auto& [name, value] : vars) cmd += " " + std::string(name) + "=" + shell_quote(value);
  // One script at a time, as --test-concurrency=1 would say (Node 18, Debian 12's, lacks it):
  // they share the gateway and its queue.
  const std::string env = cmd;
  cmd = "rc=0;";
  for (const auto& s : scripts) cmd += " " + env + " node --test " + shell_quote(s) + " || rc=1;";
  cmd = "{ " + cmd + " exit $rc; } 2>&1";
  auto r = testing::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\n" << logs();
  // The summary lines, for the log of a passing run too.
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# ")) std::printf("%s\n", line.c_str());
  }
}

// The SSE events of a stream as curl wrote them: the text of the chunks, and whether it ended
// with [DONE].
struct sse_read {
  std::string text;
  uint64_t job_id = 0;
  bool done = false;
};

sse_read parse_sse(const std::string& body) {
  sse_read s;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (!event.starts_with("data: ")) continue;
    const std::string data = event.substr(6);
    if (data == "[DONE]") {
      s.done = true;
      continue;
    }
    auto j = nlohmann::json::parse(data);
    const std::string id = j["id"];
    s.job_id = std::stoull(id.substr(id.find('-') + 1));
    if (!j["choices"].empty()) s.text += j["choices"][0].value("text", "");
  }
  return s;
}

TEST_F(gateway_openai, a_node_killed_mid_stream_costs_the_client_no_text_and_no_repeats) {
  const std::string out = c_->dir().file("failover.sse");
  const std::string body = R"({"model":"relay","prompt":"Once upon a time","max_tokens":120,)"
                           R"("seed":7,"stream":true})";
  // Through sh for curl's place on the PATH; exec leaves curl as the process.
  std::string cmd = "exec curl -sS -N --max-time 120 -o " + shell_quote(out);
  for (const std::string& a :
       {"Authorization: Bearer " + *api_key_, std::string("Content-Type: application/json")}) {
    cmd += " -H " + shell_quote(a);
  }
  cmd += " -d " + shell_quote(body) + " " + shell_quote(url() + "/v1/completions");
  process curl = testing::spawn({"/bin/sh", "-c", cmd}, c_->dir().file("failover-curl.log"));
  // Some text has reached the client: find the job and the node that runs it.
  uint64_t job_id = 0;
  ASSERT_TRUE(testing::wait_until(
      [&] {
        std::ifstream f(out);
        std::stringstream ss;
        ss << f.rdbuf();
        auto s = parse_sse(ss.str());
        job_id = s.job_id;
        return s.text.size() > 20;
      },
      std::chrono::seconds(30)))
      << logs();
  wire::get_job g;
  g.job_id = job_id;
  std::string error;
  auto before = admin_->request<wire::job_reply>(g, &error);
  ASSERT_TRUE(before) << error;
  const std::string node = before->job.summary.node;
  ASSERT_TRUE(node == "relay-a" || node == "relay-b") << node;
  (node == "relay-a" ? relay_a_ : relay_b_)->signal(SIGKILL);

  ASSERT_EQ(curl.wait(std::chrono::seconds(120)), 0) << "curl:\n" << curl.log() << logs();
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  const sse_read s = parse_sse(ss.str());
  EXPECT_TRUE(s.done) << ss.str();
  auto after = admin_->request<wire::job_reply>(g, &error);
  ASSERT_TRUE(after) << error;
  EXPECT_EQ(after->job.summary.state, wire::job_state::completed);
  EXPECT_GE(after->job.summary.attempts, 2u) << "the job moved to the other node";
  EXPECT_EQ(after->job.summary.n_gen, 120u);
  // The whole text, once: what the job's last attempt wrote.
  EXPECT_EQ(s.text, after->job.output);
}

TEST_F(gateway_openai, a_model_whose_nodes_are_all_offline_is_a_503_and_an_unknown_one_a_404) {
  for (process* p : {relay_a_, relay_b_}) p->signal(SIGKILL);
  // The broker sees them go within its liveness (1 s); the gateway's list is a second old at most.
  ASSERT_TRUE(testing::wait_until([] {
    auto r = http_get(port_, "/v1/models/relay", *api_key_);
    return r.starts_with("200") && r.find("\"nodes\":[]") != std::string::npos;
  })) << http_get(port_, "/v1/models/relay", *api_key_);
  auto post = [&](const std::string& model) {
    const std::string body = R"({"model":")" + model + R"(","prompt":"Once","max_tokens":2})";
    return testing::run_command("curl -s -w ' %{http_code}' -H " +
                                shell_quote("Authorization: Bearer " + *api_key_) +
                                " -H 'Content-Type: application/json' -d " + shell_quote(body) +
                                " " + shell_quote(url() + "/v1/completions"));
  };
  auto r = post("relay");
  ASSERT_TRUE(r.out.ends_with(" 503")) << r.out;
  auto e = nlohmann::json::parse(r.out.substr(0, r.out.size() - 4))["error"];
  EXPECT_EQ(e["message"],
            "model 'relay' is known, but no node that serves it is online; retry later");
  EXPECT_EQ(e["type"], "server_error");
  r = post("nonesuch");
  ASSERT_TRUE(r.out.ends_with(" 404")) << r.out;
  e = nlohmann::json::parse(r.out.substr(0, r.out.size() - 4))["error"];
  EXPECT_EQ(e["code"], "model_not_found");
  for (const char* known : {"stories260K", "stories-chat", "slow", "relay"}) {
    EXPECT_NE(e["message"].get<std::string>().find(known), std::string::npos) << e["message"];
  }
}

// A full queue is a 429 in OpenAI's shape, which clients take as "retry later". A cluster of its
// own: a broker whose queue holds one job, a one-slot node generating 5 tokens a second.
TEST(gateway_openai_queue, a_request_past_a_full_queue_is_a_429) {
  cluster c(false);
  c.broker_settings({{"max_queue", "1"}});
  auto broker = c.start_broker();
  auto node =
      c.start_node("slow", c.models("slow", {"slow"}), "null", 1, {"--null-tokens-per-s", "5"});
  auto admin = c.client();
  ASSERT_TRUE(testing::nodes_online(*admin, 1)) << broker.log() << node.log();
  const int port = testing::free_port();
  auto gateway =
      testing::spawn({HEARTH_GATEWAY_BIN, "--listen", "127.0.0.1:" + std::to_string(port),
                      "--broker", c.endpoint(), "--db", c.dir().file("gateway.db")},
                     c.dir().file("gateway.log"));
  ASSERT_TRUE(testing::wait_until([&] { return http_get(port, "/health").starts_with("200"); }))
      << gateway.log();
  const std::string curl =
      "curl -s -w ' %{http_code}' -H 'Content-Type: application/json' -d " +
      shell_quote(R"({"model":"slow","prompt":"Once","max_tokens":100})") + " " +
      shell_quote("http://127.0.0.1:" + std::to_string(port) + "/v1/completions");
  auto jobs_in = [&](wire::job_state state) {
    auto r = admin->request<wire::jobs_reply>(wire::list_jobs{0, "", "", 100});
    return r ? std::count_if(r->jobs.begin(), r->jobs.end(),
                             [&](const auto& j) { return j.state == state; })
             : 0;
  };
  // The first runs (20 s), the second waits in the queue; the third finds it full.
  auto running = testing::spawn({"/bin/sh", "-c", "exec " + curl}, c.dir().file("curl-1.log"));
  ASSERT_TRUE(testing::wait_until([&] { return jobs_in(wire::job_state::running) == 1; }));
  auto queued = testing::spawn({"/bin/sh", "-c", "exec " + curl}, c.dir().file("curl-2.log"));
  ASSERT_TRUE(testing::wait_until([&] { return jobs_in(wire::job_state::queued) == 1; }));
  auto r = testing::run_command(curl);
  ASSERT_TRUE(r.out.ends_with(" 429")) << r.out << gateway.log();
  auto e = nlohmann::json::parse(r.out.substr(0, r.out.size() - 4))["error"];
  EXPECT_EQ(e["code"], "queue_full");
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_NE(e["message"].get<std::string>().find("the queue is full"), std::string::npos)
      << e["message"];
  // The clients that give up cancel their jobs: nothing is left running.
  for (process* p : {&running, &queued}) p->signal(SIGKILL);
  EXPECT_TRUE(testing::wait_until(
      [&] { return jobs_in(wire::job_state::running) + jobs_in(wire::job_state::queued) == 0; }));
}

// Last: it stops the broker.
TEST_F(gateway_openai, without_a_broker_requests_get_a_503_not_a_hang) {
  broker_->signal(SIGKILL);
  broker_->wait();
  const std::string body = R"({"model":"stories260K","prompt":"Once","max_tokens":2})";
  // The link's request timeout (10 s) bounds the wait; curl's --max-time is the liveness bound.
  auto r = testing::run_command("curl -s --max-time 60 -w ' %{http_code}' -H " +
                                shell_quote("Authorization: Bearer " + *api_key_) +
                                " -H 'Content-Type: application/json' -d " + shell_quote(body) +
                                " " + shell_quote(url() + "/v1/completions"));
  ASSERT_TRUE(r.out.ends_with(" 503")) << r.out;
  auto e = nlohmann::json::parse(r.out.substr(0, r.out.size() - 4))["error"];
  EXPECT_EQ(e["type"], "server_error");
  EXPECT_EQ(http_get(port_, "/health").substr(0, 3), "503");
}

}  // namespace
}  // namespace hearth
